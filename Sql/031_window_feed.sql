-- Windows (partial sync, API.md "Windows (partial sync)"): a device may hold only the todos whose
-- deadline, and the daily stats whose date, fall in a window of dates, plus every tag.
--
-- live_day is the date a feed row's record counts for while it is live: a todo's deadline, a
-- daily stat's date, 1000-01-01 for a tag (before every date a window can have: a window's
-- first pull reads the tags first), NULL for a tombstone. The write path keeps it with the row
-- (`FeedEntry.liveDay`).
--
-- sync_feed_window (user_id, live_day, version) serves a window's first pull: the records live
-- at its start that lie in the window are one ordered range of it (the tags, then the window's
-- dates), read from the cursor's (live_day, version) onward, so a page reads the rows it sends
-- and a few changed since the pull began, whatever the size of the account. A pull with a
-- cursor reads the primary key by version as a whole pull does: every row after the cursor is
-- sent, as an upsert, a tombstone or an entry of `left`, so that read is in proportion to the
-- page already. Plans and rows read per page: docs/WINDOWS.md.
--
-- Existing rows are filled below from the tables (live rows only).

ALTER TABLE sync_feed
    ADD COLUMN live_day DATE NULL,
    ADD KEY sync_feed_window (user_id, live_day, version);

UPDATE sync_feed f JOIN todos t ON t.user_id = f.user_id AND t.id = f.record_id
   SET f.live_day = t.deadline
 WHERE f.kind = 2 AND f.deleted_at IS NULL;

UPDATE sync_feed f JOIN daily_stats s ON s.user_id = f.user_id AND s.id = f.record_id
   SET f.live_day = s.day
 WHERE f.kind = 3 AND f.deleted_at IS NULL;

UPDATE sync_feed SET live_day = '1000-01-01' WHERE kind = 1 AND deleted_at IS NULL;

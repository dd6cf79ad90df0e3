-- Read layouts. GET /daily-stats?month= reads a user's stats by day. Clustered by (user_id, day), that is one
-- contiguous range read of the primary key instead of a secondary-index range plus a primary-key
-- lookup per row (scattered, since stats of all users are created interleaved). The id stays
-- the stat's identity (AUTO_INCREMENT, unique); the former unique key on (user_id, day) is the
-- primary key now.

ALTER TABLE daily_stats
    DROP PRIMARY KEY,
    ADD PRIMARY KEY (user_id, day),
    ADD UNIQUE KEY daily_stats_id (id),
    DROP KEY daily_stats_user_day;

-- Pull reads the change feed now (migration 007): the (user_id, version, deleted_at) indexes that
-- served the old per-table pull only cost memory and every write.

ALTER TABLE tags DROP KEY tags_user_version_deleted;

ALTER TABLE todos DROP KEY todos_user_version_deleted;

ALTER TABLE daily_stats DROP KEY daily_stats_user_version_deleted;

-- GET /todos reads todo_list (migration 008), so the todos index that carried the list order
-- (with importance, creation time and the 200-character title, rewritten by every edit of them)
-- only has to find a user's live todos of a date, for daily-stat recomputation.

ALTER TABLE todos DROP KEY todos_user_day_order, ADD KEY todos_user_day (user_id, deleted_at, deadline);

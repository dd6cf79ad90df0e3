-- Schema version 2: a todo's notes (API.md "Todos": null or 0–10,000 characters, kept exactly
-- as given, newlines included). TEXT holds 65,535 bytes: 10,000 characters of 4 bytes fit.
--
-- The change feed and the todo list hold todos rendered at the current schema version, which
-- now has `notes`: every user is queued for the feed back-fill (as in 007), which `todosync
-- migrate` runs right after this file; a queued user's pull answers 503 until it is done.
-- Responders of the previous release still running after this file render todos without
-- `notes` when they write (they never change the column): once they are all replaced, `todosync
-- check-feed` names any such row and `todosync rebuild-feed` renders it afresh.

ALTER TABLE todos ADD COLUMN notes TEXT NULL AFTER raw;

INSERT IGNORE INTO sync_feed_backfill (user_id) SELECT id FROM users;

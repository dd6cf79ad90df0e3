-- Schema version 3: a todo's remindAt (API.md "Todos": null or an instant, normalised to UTC
-- milliseconds, its UTC year within 2000–2999). DATETIME(3) holds it as every other instant here
-- (UTC text, `Timestamp.databaseText`); `Todo(row:)` sends it back as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
--
-- The change feed and the todo list hold todos rendered at the current schema version, which
-- now has `remindAt`: every user is queued for the feed back-fill (as after 021), which `todosync
-- migrate` runs right after this file; a queued user's pull answers 503 until it is done. A
-- rendered todo grows by at most 36 bytes (`"remindAt":"…Z",`); `StorageCapacityTests` holds
-- every column that stores one to `Todo.maximumRenderedBytes`.

ALTER TABLE todos ADD COLUMN remind_at DATETIME(3) NULL AFTER notes;

INSERT IGNORE INTO sync_feed_backfill (user_id) SELECT id FROM users;

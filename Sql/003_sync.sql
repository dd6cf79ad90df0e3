-- Sync: exactly-once push results and tombstone purging.
--
-- sync_operations remembers each (user, opId) with the result the client was given, committed in
-- the same transaction as the operation's effect, so a replay returns it and changes nothing.
-- users.purged_through is the highest version of any purged tombstone of the user: a pull cursor
-- below it may have missed a deletion and gets 410 cursor_expired.

CREATE TABLE sync_operations (
    user_id                BIGINT UNSIGNED NOT NULL,
    op_key                 VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    device_id              VARCHAR(100) NOT NULL,
    result                 MEDIUMTEXT NOT NULL,
    created_at             DATETIME(3) NOT NULL,
    PRIMARY KEY (user_id, op_key),
    KEY sync_operations_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

ALTER TABLE users ADD COLUMN purged_through BIGINT UNSIGNED NOT NULL DEFAULT 0;

ALTER TABLE tags ADD KEY tags_deleted (deleted_at);

ALTER TABLE todos ADD KEY todos_deleted (deleted_at);

ALTER TABLE daily_stats ADD KEY daily_stats_deleted (deleted_at);

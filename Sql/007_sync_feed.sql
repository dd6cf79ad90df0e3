-- The change feed: one row per synced record (tag, todo, daily stat) holding its latest state,
-- already rendered as the contract's JSON (the record, or its tombstone), clustered by
-- (user_id, version) so a pull page is one contiguous range read whose bytes the responder copies.
--
-- Written by the single write path in the same transaction as the change, replacing the record's
-- previous row (unique on user_id, kind, record_id), so it is never stale. kind: 1 tag, 2 todo,
-- 3 daily stat. deleted_at is set for tombstones (purged with them). device is the number of the
-- device whose pushed operation made this version (sync_devices), NULL for REST and derived
-- changes. parent_tags lists the tags a live todo or stat refers to (comma-separated ids, '' for
-- none), for the pull's referential completeness.
--
-- Existing data is back-filled by `todosync migrate` after this file: it renders the feed of
-- each user queued in sync_feed_backfill (one user per transaction, under the user's write lock)
-- and removes the user from the queue. A pull of a user still queued answers 503.

CREATE TABLE sync_feed (
    user_id                BIGINT UNSIGNED NOT NULL,
    version                BIGINT UNSIGNED NOT NULL,
    kind                   TINYINT UNSIGNED NOT NULL,
    record_id              BIGINT UNSIGNED NOT NULL,
    deleted_at             DATETIME(3) NULL,
    device                 BIGINT UNSIGNED NULL,
    parent_tags            TEXT CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    body                   MEDIUMBLOB NOT NULL,
    PRIMARY KEY (user_id, version),
    UNIQUE KEY sync_feed_record (user_id, kind, record_id),
    KEY sync_feed_deleted (deleted_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE sync_feed_backfill (
    user_id                BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

INSERT INTO sync_feed_backfill (user_id) SELECT id FROM users;

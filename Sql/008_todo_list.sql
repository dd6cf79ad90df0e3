-- GET /todos (by date and by range) reads this: each live todo's JSON, rendered at write time by
-- the same writer as the feed, clustered in the contract's order, so a list is one contiguous
-- range read of the primary key: no primary-key lookup per row, no filesort, no encoding.
--
-- title_key is the title after simple lowercasing, as UTF-8 bytes: VARBINARY compares bytewise,
-- which for UTF-8 is code point order (the contract's "title A→Z"; the utf8mb4_unicode_ci
-- collation would put `äpfel` before `apfel`). The write path keeps the table in step with
-- `todos` in the same transaction (REPLACE through the unique (user_id, id) key moves a todo
-- whose date, importance or title changed); tombstones are not listed. Existing data is filled
-- by the back-fill of `todosync migrate` (users queued again here).

CREATE TABLE todo_list (
    user_id                BIGINT UNSIGNED NOT NULL,
    deadline               DATE NOT NULL,
    is_important           TINYINT(1) NOT NULL,
    created_at             DATETIME(3) NOT NULL,
    title_key              VARBINARY(800) NOT NULL,
    id                     BIGINT UNSIGNED NOT NULL,
    body                   BLOB NOT NULL,
    PRIMARY KEY (user_id, deadline, is_important DESC, created_at DESC, title_key, id),
    UNIQUE KEY todo_list_todo (user_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

INSERT IGNORE INTO sync_feed_backfill (user_id) SELECT id FROM users;

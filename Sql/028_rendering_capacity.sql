-- Issue 34, items 3 and 4: every stored rendering fits the largest valid record, and what
-- Idempotency-Key answers store is counted and bounded per account.
--
-- Item 3. todo_list.body was a BLOB (65,535 bytes), but a valid todo renders up to
-- `Todo.maximumRenderedBytes` (73,597 bytes at schema 2: 12,200 characters of title, raw and
-- notes, each a 6-byte `\u00XX` escape when it is a control character). Such a todo was a 500 on
-- every write, and in a push the whole batch rolled back on every retry. MEDIUMBLOB (16 MiB) is
-- what the other columns keeping a todo's JSON already are (sync_feed.body,
-- sync_result_records.record); `StorageCapacityTests` compares them all with the bound.
-- MariaDB 10.11 changes a column's type only by copying the table (INSTANT, NOCOPY and INPLACE
-- are refused: "Cannot change column type"), so this statement takes LOCK=SHARED: reads of
-- todo_list go on, writes of todos wait for the copy (measured: 200,000 rows in 7 s on the
-- 2-core test box). On MariaDB 11.2 or later, LOCK=NONE would do it online.

ALTER TABLE todo_list MODIFY body MEDIUMBLOB NOT NULL, ALGORITHM=COPY, LOCK=SHARED;

-- The same for a daily stat's `tagStats` (rendered, Sql/002) and its `tag_counts` (Sql/023): TEXT
-- held the stat of a date whose completed todos name at most 177 tags at their widest (names of
-- 50 escaped control characters, `DailyStatContent.maximumTagStatBytes`), and every write of such
-- a date was a 500 (240 tags in one push: the whole push, on every retry). The contract has no
-- limit on tags; MEDIUMTEXT holds `StorageCapacity.tagsPerDate` (10,000) and more. Also a copy
-- under LOCK=SHARED, for the same reason.

ALTER TABLE daily_stats MODIFY tag_stats MEDIUMTEXT NOT NULL, MODIFY tag_counts MEDIUMTEXT NOT NULL DEFAULT '',
    ALGORITHM=COPY, LOCK=SHARED;

-- Item 4. A keyed push's answer is no longer stored: it is rebuilt from the push's stored op
-- results (`replay` = 1, `response_body` NULL), since a repeat of the same push replays every
-- opId and so answers the same bytes. 20 keyed pushes of 250 no-op updates of a 54 KB todo
-- stored 272 MB of answers (13.6 MB each), now about 100 bytes each. Every other answer is
-- stored as before and now counted:
--   * stored_bytes: what the row costs (key, fingerprint, headers, body, and a fixed overhead),
--     charged to the account's stored bytes per hour (Sql/020) and summed for its ceiling;
--   * idempotency_keys_user_usage: the account's rows by age with their bytes, so that the
--     ceiling is a range read of this index, and the rows past retention are found by it;
--   * users.quota_idempotency_keys / quota_idempotency_bytes: one account's ceiling on the rows
--     and bytes it keeps (NULL: StoreConfiguration's defaults).
-- All instant or online: columns added in place, the index built while writes go on.

ALTER TABLE idempotency_keys
    ADD COLUMN replay TINYINT NOT NULL DEFAULT 0,
    ADD COLUMN stored_bytes INT UNSIGNED NOT NULL DEFAULT 0,
    ALGORITHM=INSTANT;

ALTER TABLE idempotency_keys ADD INDEX idempotency_keys_user_usage (user_id, created_at, stored_bytes),
    ALGORITHM=INPLACE, LOCK=NONE;

ALTER TABLE users
    ADD COLUMN quota_idempotency_keys INT UNSIGNED NULL,
    ADD COLUMN quota_idempotency_bytes BIGINT UNSIGNED NULL,
    ALGORITHM=INSTANT;

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

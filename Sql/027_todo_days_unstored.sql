-- The day lists a write left not stored, findable without reading the table (issue 25): a push
-- of more than `SQL.TodoDays.rebuildLimit` dates only marks them (Sql/025), and until this file a
-- marked date stayed on todo_list's range read until its next small write or `rebuild-feed`.
-- `todosync store-days`, started every minute by todosync-store-days.timer, reads the index below
-- and stores them again (`Store.storeUnstoredDays`).
--   * unstored: 1 for a row store-days is to rebuild, NULL for one it leaves alone. The rebuild
--     (`SQL.TodoDays.rebuild`) writes NULL, also for a list too long to store (its body NULL for
--     good, until the list changes); the marking (`SQL.TodoDays.unstore`) writes 1. The default
--     is 1: every row this file finds is rebuilt by the first pass (which so stores the rows
--     Sql/025 back-filled), and a row a responder of the previous release inserts is rebuilt
--     once. (A mark by such a responder of an existing row is not seen: that date reads
--     todo_list, rightly, until its next write.)
--   * todo_days_unstored: those rows in key order, so that a pass is a range read of them.
-- A real column, written by the statements that write the body: an indexed generated column
-- (virtual) cost pushes of 4 operations 6 % (docs/BENCHMARKS.md), a stored one copied the table.
-- Online: the column is added in place (metadata only) and the index built while writes go on
-- (LOCK=NONE); a server that cannot do either refuses instead of locking the table.

ALTER TABLE todo_days ADD COLUMN unstored TINYINT NULL DEFAULT 1, ALGORITHM=INSTANT;

ALTER TABLE todo_days ADD INDEX todo_days_unstored (unstored, user_id, deadline), ALGORITHM=INPLACE, LOCK=NONE;

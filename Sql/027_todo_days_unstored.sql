-- The day lists a write left not stored, findable without reading the table (issue 25): a push
-- of more than `SQL.TodoDays.rebuildLimit` dates only marks them (Sql/025), and until this file a
-- marked date stayed on todo_list's range read until its next small write or `rebuild-feed`.
-- `todosync store-days`, started every minute by todosync-store-days.timer, reads the index below
-- and stores them again (`Store.storeUnstoredDays`).
--   * too_long: 1 when the rebuild found the list longer than `SQL.TodoDays.maxBodyBytes` (its
--     body NULL for good, until the list changes); the marking (`SQL.TodoDays.unstore`) clears it.
--   * unstored: 1 for a row whose body is NULL and not too long: marked, or back-filled by
--     Sql/025. Virtual, computed from the row, so a mark by a responder of the previous release
--     is found too (one that marks a too-long list is not: that date reads todo_list, rightly,
--     until its next write).
--   * todo_days_unstored: those rows in key order, so that a pass is a range read of them.
-- Online: the columns are added in place (metadata only) and the index is built while writes go
-- on (LOCK=NONE); a server that cannot do either refuses the statement instead of copying the
-- table under a write lock (Sql/026, a stored column, did copy it).

ALTER TABLE todo_days ADD COLUMN too_long TINYINT NULL, ALGORITHM=INSTANT;

ALTER TABLE todo_days
    ADD COLUMN unstored TINYINT AS (IF(body IS NULL AND too_long IS NULL, 1, NULL)) VIRTUAL,
    ALGORITHM=INSTANT;

ALTER TABLE todo_days ADD INDEX todo_days_unstored (unstored, user_id, deadline), ALGORITHM=INPLACE, LOCK=NONE;

-- The day lists a write left not stored, findable without reading the table (issue 25): a push
-- of more than `SQL.TodoDays.rebuildLimit` dates only marks them (Sql/025), and until this file a
-- marked date stayed on todo_list's range read until its next small write or `rebuild-feed`.
-- `todosync store-days`, started every minute by todosync-store-days.timer, reads this index and
-- stores them again (`Store.storeUnstoredDays`).
--   * unstored: 1 when the row's body is NULL (marked, back-filled, or longer than
--     `SQL.TodoDays.maxBodyBytes`), NULL when stored. Generated from the body, so every write keeps
--     it, a responder of the previous release's too.
--   * todo_days_unstored: the marked rows in key order, so the pass is a range read of them.
-- A list too long to store stays unstored, and each pass rebuilds it once more (rare: a date
-- over 256 KiB of todos).

ALTER TABLE todo_days
    ADD COLUMN unstored TINYINT AS (IF(body IS NULL, 1, NULL)) STORED,
    ADD INDEX todo_days_unstored (unstored, user_id, deadline);

-- GET /todos?date= reads one row: each date's list stored whole (issue 25). The body is the
-- bodies of the date's todo_list rows (migration 008) in the contract's order, joined by commas:
-- exactly the bytes the range read of todo_list answers inside `[` and `]`. The read is one
-- primary-key lookup, with the bearer token checked in the same statement (a LEFT JOIN).
--
-- Every date with live todos has a row, so a date without one answers `[]` from that lookup. A
-- row's body is NULL when the list is not stored, and its read takes the range read of todo_list:
--   * a list longer than the session's GROUP_CONCAT bound (`Connection.groupConcatMaxLength`),
--     so that no write rewrites more than that per date;
--   * the dates of a write that touched more than `SQL.TodoDays.rebuildLimit` of them: a date's
--     rebuild costs about a read of its todos, so a big push or import only marks them;
--   * the back-fill below.
-- The write path keeps the rows in the transaction that changes todo_list (`TodoDayRows.write`):
-- it deletes and rebuilds from todo_list the rows of each date whose list rows it deleted or
-- inserted (a locking read: what is committed plus its own rows), or marks them.
--
-- Back-filled below as NULL rows for every date with live todos: tiny whatever the size of the
-- database, and right. A date's body is stored by its next small write; `todosync rebuild-feed`
-- stores every one. Responders of the previous release still running after this file change
-- todo_list without touching these rows: once they are all replaced, run `todosync rebuild-feed`
-- (docs/OPERATIONS.md); `todosync check-feed` reports a date with live todos and no row, or a
-- stored body that is not its list.

CREATE TABLE todo_days (
    user_id                BIGINT UNSIGNED NOT NULL,
    deadline               DATE NOT NULL,
    body                   MEDIUMBLOB NULL,
    PRIMARY KEY (user_id, deadline)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

INSERT INTO todo_days (user_id, deadline, body)
SELECT user_id, deadline, NULL FROM todo_list GROUP BY user_id, deadline;

-- EXPLAIN of the queries behind the benchmark's scenarios (run by bench/run.sh after seeding, for
-- user 2, with @token set to user 2's token; output in <state>/results/explain.txt). Texts as in
-- Sources/TodoSyncStore/SQL.swift, with literals in place of the bound parameters.
SELECT 'todos by date, token checked in the same statement (SQL.Todos.listLiveInRangeForToken)' AS query;
EXPLAIN SELECT t.id, t.client_id, t.title, t.raw, t.is_important, t.is_life, t.tag_id, t.difficulty, t.estimated_time,
       t.deadline, t.is_completed, t.version, t.created_at, t.updated_at, t.deleted_at
  FROM auth_tokens a JOIN todos t FORCE INDEX (todos_user_day_order) ON t.user_id = a.user_id
 WHERE a.token_hash = UNHEX(SHA2(@token, 256)) AND a.expires_at > NOW(3)
   AND t.deleted_at IS NULL AND t.deadline BETWEEN '2025-03-03' AND '2025-03-03'
 ORDER BY t.deadline, t.is_important DESC, t.created_at DESC, t.title, t.id;
SELECT 'daily stats by month, token checked in the same statement (SQL.DailyStats.liveInRangeForToken)' AS query;
EXPLAIN SELECT s.id, s.day, s.todo_count, s.completed_count, s.productivity_hundredths, s.balance_num,
       s.center_x_hundredths, s.center_y_hundredths, s.tag_stats, s.version, s.created_at, s.updated_at, s.deleted_at
  FROM auth_tokens a JOIN daily_stats s FORCE INDEX (daily_stats_user_day) ON s.user_id = a.user_id
 WHERE a.token_hash = UNHEX(SHA2(@token, 256)) AND a.expires_at > NOW(3)
   AND s.day BETWEEN '2025-03-01' AND '2025-03-31' AND s.deleted_at IS NULL
 ORDER BY s.day;
SELECT 'auth on its own: other routes, and a list read that found nothing (SQL.Tokens.userForToken)' AS query;
EXPLAIN SELECT user_id FROM auth_tokens WHERE token_hash = UNHEX(SHA2(@token, 256)) AND expires_at > NOW(3);
SELECT 'pull step 1: versions of the next changes, index only (SQL.Pull.todoVersions)' AS query;
EXPLAIN SELECT version FROM todos FORCE INDEX (todos_user_version_deleted)
 WHERE user_id = 2 AND version > 500 AND (deleted_at IS NULL OR version > 100000) ORDER BY version LIMIT 501;
SELECT 'pull step 2: the rows of the page (SQL.Pull.todoPage)' AS query;
EXPLAIN SELECT id, client_id, title, raw, is_important, is_life, tag_id, difficulty, estimated_time, deadline,
       is_completed, version, created_at, updated_at, deleted_at FROM todos FORCE INDEX (todos_user_version_deleted)
 WHERE user_id = 2 AND version > 500 AND version <= 1000 AND (deleted_at IS NULL OR version > 100000)
 ORDER BY version;
SELECT 'push: stats inputs of a batch of days (SQL.DailyStats.inputsForDays)' AS query;
EXPLAIN SELECT t.deadline, t.is_completed, t.is_life, t.difficulty, t.estimated_time, t.tag_id, g.name, g.color
  FROM todos t FORCE INDEX (todos_user_day_order) LEFT JOIN tags g ON g.id = t.tag_id AND g.user_id = t.user_id
 WHERE t.user_id = 2 AND t.deleted_at IS NULL AND t.deadline IN ('2025-03-03', '2025-03-04');

-- EXPLAIN of the queries behind the benchmark's scenarios (run by bench/run.sh after seeding, for
-- user 2, with @token set to user 2's token; output in <state>/results/explain.txt). Texts as in
-- Sources/TodoSyncStore/SQL.swift.
SELECT 'todos by date (SQL.Todos.listLiveInRange)' AS query;
EXPLAIN SELECT id, client_id, title, raw, is_important, is_life, tag_id, difficulty, estimated_time, deadline,
       is_completed, version, created_at, updated_at, deleted_at FROM todos FORCE INDEX (todos_user_day_order)
 WHERE user_id = 2 AND deleted_at IS NULL AND deadline BETWEEN '2025-03-03' AND '2025-03-03'
 ORDER BY deadline, is_important DESC, created_at DESC, title, id;
SELECT 'daily stats by month (SQL.DailyStats.liveInRange)' AS query;
EXPLAIN SELECT id, day, todo_count, completed_count, productivity_hundredths, balance_num, center_x_hundredths,
       center_y_hundredths, tag_stats, version, created_at, updated_at, deleted_at FROM daily_stats FORCE INDEX (daily_stats_user_day)
 WHERE user_id = 2 AND day BETWEEN '2025-03-01' AND '2025-03-31' AND deleted_at IS NULL ORDER BY day;
SELECT 'auth (SQL.Tokens.userForToken)' AS query;
EXPLAIN SELECT user_id FROM auth_tokens WHERE token_hash = UNHEX(SHA2(@token, 256)) AND expires_at > NOW(3);
SELECT 'pull: todos page (SQL.Pull.todosChanged), cursor after the tags' AS query;
EXPLAIN SELECT id, client_id, title, raw, is_important, is_life, tag_id, difficulty, estimated_time, deadline,
       is_completed, version, created_at, updated_at, deleted_at FROM todos FORCE INDEX (todos_user_version)
 WHERE user_id = 2 AND version > 500 AND (deleted_at IS NULL OR version > 100000) ORDER BY version LIMIT 501;
SELECT 'pull: daily stats (SQL.Pull.dailyStatsChanged), same cursor: rows fetched although none is in a todo page' AS query;
EXPLAIN SELECT id, day, todo_count, completed_count, productivity_hundredths, balance_num, center_x_hundredths,
       center_y_hundredths, tag_stats, version, created_at, updated_at, deleted_at FROM daily_stats FORCE INDEX (daily_stats_user_version)
 WHERE user_id = 2 AND version > 500 AND (deleted_at IS NULL OR version > 100000) ORDER BY version LIMIT 501;
SELECT 'push: stats inputs of one day (SQL.DailyStats.inputsForDay)' AS query;
EXPLAIN SELECT t.is_completed, t.is_life, t.difficulty, t.estimated_time, t.tag_id, g.name, g.color
  FROM todos t FORCE INDEX (todos_user_day_order) LEFT JOIN tags g ON g.id = t.tag_id AND g.user_id = t.user_id
 WHERE t.user_id = 2 AND t.deleted_at IS NULL AND t.deadline = '2025-03-03';

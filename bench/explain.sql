-- EXPLAIN of the queries behind the benchmark's scenarios (run by bench/run.sh after seeding, for
-- user 2, with @token set to user 2's token; output in <state>/results/explain.txt). Texts as in
-- Sources/TodoSyncStore/SQL.swift, with literals in place of the bound parameters.
SELECT 'todos by date: the stored day list, one primary-key lookup, token checked in the same statement (SQL.TodoDays.dayForToken)' AS query;
EXPLAIN SELECT d.body, d.user_id IS NOT NULL AND d.body IS NULL, COALESCE(a.last_used_at, a.created_at) < NOW(3), a.user_id
  FROM auth_tokens a LEFT JOIN todo_days d ON d.user_id = a.user_id AND d.deadline = '2025-03-03'
 WHERE a.token_hash = UNHEX(SHA2(@token, 256)) AND a.expires_at > NOW(3);
SELECT 'todos by date, not stored, and by range: one range read of todo_list, token checked in the same statement (SQL.TodoList.bodiesInRangeForToken)' AS query;
EXPLAIN SELECT l.body FROM auth_tokens a JOIN todo_list l ON l.user_id = a.user_id
 WHERE a.token_hash = UNHEX(SHA2(@token, 256)) AND a.expires_at > NOW(3)
   AND l.deadline BETWEEN '2025-03-03' AND '2025-03-09'
 ORDER BY l.deadline, l.is_important DESC, l.created_at DESC, l.title_key, l.id;
SELECT 'daily stats by month, token checked in the same statement (SQL.DailyStats.liveInRangeForToken)' AS query;
EXPLAIN SELECT s.id, s.day, s.todo_count, s.completed_count, s.productivity_hundredths, s.balance_num,
       s.center_x_hundredths, s.center_y_hundredths, s.tag_stats, s.version, s.created_at, s.updated_at, s.deleted_at
  FROM auth_tokens a JOIN daily_stats s FORCE INDEX (PRIMARY) ON s.user_id = a.user_id
 WHERE a.token_hash = UNHEX(SHA2(@token, 256)) AND a.expires_at > NOW(3)
   AND s.day BETWEEN '2025-03-01' AND '2025-03-31' AND s.deleted_at IS NULL
 ORDER BY s.day;
SELECT 'auth on its own: other routes, and a list read that found nothing (SQL.Tokens.userForToken)' AS query;
EXPLAIN SELECT user_id FROM auth_tokens WHERE token_hash = UNHEX(SHA2(@token, 256)) AND expires_at > NOW(3);
SELECT 'pull page: one range read of the change feed (SQL.Feed.page)' AS query;
EXPLAIN SELECT version, kind, record_id, device, parent_tags, body, deleted_at IS NOT NULL FROM sync_feed
 WHERE user_id = 2 AND version > 500 AND (deleted_at IS NULL OR version > 100000) ORDER BY version LIMIT 501;
SELECT 'pull: parent tags by the record key (SQL.Feed.parentTags)' AS query;
EXPLAIN SELECT version, body FROM sync_feed FORCE INDEX (sync_feed_record)
 WHERE user_id = 2 AND kind = 1 AND version > 500 AND deleted_at IS NULL AND (device IS NULL OR device <> 0)
   AND record_id IN (1, 2, 3, 4, 5, 6, 7, 8);
SELECT 'push: stats inputs of a batch of days (SQL.DailyStats.inputsForDays)' AS query;
EXPLAIN SELECT t.deadline, t.is_completed, t.is_life, t.difficulty, t.estimated_time, t.tag_id, g.name, g.color
  FROM todos t FORCE INDEX (todos_user_day) LEFT JOIN tags g ON g.id = t.tag_id AND g.user_id = t.user_id
 WHERE t.user_id = 2 AND t.deleted_at IS NULL AND t.deadline IN ('2025-03-03', '2025-03-04');

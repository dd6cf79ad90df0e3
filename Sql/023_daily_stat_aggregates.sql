-- Incremental daily stats (issue 25): each stat row keeps the sums it is rendered from, so a
-- write applies each changed todo as a delta instead of reading every todo of the date again
-- (DailyStatsRecomputer). With todo_count and completed_count, which the stat already has:
--   weighted_minutes  Σ difficulty × estimated_time over the date's completed live todos
--   life_minutes      Σ estimated_time over those with is_life
--   work_minutes      Σ estimated_time over those without
--   tag_counts        completed live todos per tag: "tagId:count" by ascending tagId, comma-separated
-- A tombstone's are all zeros. Back-filled below from the todos.
--
-- Responders of the previous release still running after this file write stats without these
-- columns: once they are all replaced, run `todosync recompute-stats` (docs/OPERATIONS.md), which
-- rebuilds every aggregate and stat from the todos (versions change only where a stat does).

ALTER TABLE daily_stats
    ADD COLUMN weighted_minutes BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN life_minutes BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN work_minutes BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN tag_counts TEXT NOT NULL DEFAULT '';

UPDATE daily_stats s
  JOIN (SELECT user_id, deadline,
               SUM(difficulty * estimated_time) AS weighted,
               SUM(IF(is_life, estimated_time, 0)) AS life,
               SUM(IF(is_life, 0, estimated_time)) AS work
          FROM todos
         WHERE deleted_at IS NULL AND is_completed = 1
         GROUP BY user_id, deadline) a ON a.user_id = s.user_id AND a.deadline = s.day
   SET s.weighted_minutes = a.weighted, s.life_minutes = a.life, s.work_minutes = a.work
 WHERE s.deleted_at IS NULL;

UPDATE daily_stats s
  JOIN (SELECT user_id, deadline, GROUP_CONCAT(tag_id, ':', n ORDER BY tag_id SEPARATOR ',') AS counts
          FROM (SELECT user_id, deadline, tag_id, COUNT(*) AS n
                  FROM todos
                 WHERE deleted_at IS NULL AND is_completed = 1 AND tag_id IS NOT NULL
                 GROUP BY user_id, deadline, tag_id) t
         GROUP BY user_id, deadline) c ON c.user_id = s.user_id AND c.deadline = s.day
   SET s.tag_counts = c.counts
 WHERE s.deleted_at IS NULL;

-- Each account's live-record count, kept by the write path.
--
-- The record quota (Sql/012) used to count an account's live tags and todos before every create:
-- two COUNT(*)s outside the write transaction, about 4.7 ms of the 34.5 ms of statements a
-- 100-operation push cost (measured, 5,000 todos per user). The write transaction now adds its
-- net change (creates and restores minus deletes) to users.live_records under the user's row
-- lock, with the change sequence. When the counter says a write would pass the quota, the store
-- recounts exactly before refusing, so a counter that drifted (rows written by hand, or by a
-- responder older than this migration during a rolling upgrade) corrects itself.

ALTER TABLE users ADD COLUMN live_records BIGINT NOT NULL DEFAULT 0;

UPDATE users u
   SET live_records = (SELECT COUNT(*) FROM todos t WHERE t.user_id = u.id AND t.deleted_at IS NULL)
                    + (SELECT COUNT(*) FROM tags g WHERE g.user_id = u.id AND g.deleted_at IS NULL);

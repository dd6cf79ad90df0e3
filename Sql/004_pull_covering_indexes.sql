-- Pull finds a page's end by reading versions only: (user_id, version, deleted_at) lets that
-- first step (including the first pull's "skip old tombstones" condition) run on the index
-- alone, without touching rows that will not be on the page.

ALTER TABLE tags ADD KEY tags_user_version_deleted (user_id, version, deleted_at);

ALTER TABLE todos ADD KEY todos_user_version_deleted (user_id, version, deleted_at);

ALTER TABLE daily_stats ADD KEY daily_stats_user_version_deleted (user_id, version, deleted_at);

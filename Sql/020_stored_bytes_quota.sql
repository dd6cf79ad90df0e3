-- A quota on what an account's writes store per clock hour (round 3, item 5).
--
-- Stored push results are kept 90 days; before Sql/019 one account could store 2.7 GB an hour
-- of them. Sql/019 bounds what one push stores relative to its size; this bounds the hour.
-- account_usage.stored_bytes counts the bytes of push results and their records stored in the
-- hour; users.quota_stored_bytes_per_hour overrides TODOSYNC_QUOTA_STORED_BYTES_PER_HOUR for one
-- account (NULL: the default).

ALTER TABLE account_usage ADD COLUMN stored_bytes BIGINT UNSIGNED NOT NULL DEFAULT 0;

ALTER TABLE users ADD COLUMN quota_stored_bytes_per_hour BIGINT UNSIGNED NULL;

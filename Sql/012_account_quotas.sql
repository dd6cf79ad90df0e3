-- Per-account quotas: live records and write operations per hour.
--
-- One account could fill the database and keep every worker busy. Each account now has a
-- budget: at most TODOSYNC_QUOTA_RECORDS live tags + todos, and at most
-- TODOSYNC_QUOTA_OPERATIONS_PER_HOUR write operations (a push operation, a REST create, update or
-- delete, a quick-add line) per clock hour. users.quota_* override the defaults for one account
-- (NULL: the configured default). account_usage counts the operations of the current hour;
-- `todosync purge` removes past hours.

ALTER TABLE users
    ADD COLUMN quota_records INT UNSIGNED NULL,
    ADD COLUMN quota_operations_per_hour INT UNSIGNED NULL;

CREATE TABLE account_usage (
    user_id                BIGINT UNSIGNED NOT NULL,
    hour_start             DATETIME NOT NULL,
    operations             INT UNSIGNED NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, hour_start),
    KEY account_usage_hour (hour_start)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

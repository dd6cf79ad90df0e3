-- Derived per-day statistics, recomputed inside every write transaction that affects them.
-- A row exists once a date has had a live todo; it becomes a tombstone (deleted_at set) when the
-- date loses its last live todo and comes back (same id, new version) when it gets one again.
-- Decimals are stored as exact hundredths; tag_stats is the contract's JSON array, computed.

CREATE TABLE daily_stats (
    id                      BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    user_id                 BIGINT UNSIGNED NOT NULL,
    day                     DATE NOT NULL,
    todo_count              INT UNSIGNED NOT NULL,
    completed_count         INT UNSIGNED NOT NULL,
    productivity_hundredths BIGINT NOT NULL,
    balance_num             TINYINT UNSIGNED NOT NULL,
    center_x_hundredths     SMALLINT NOT NULL,
    center_y_hundredths     SMALLINT NOT NULL,
    tag_stats               TEXT NOT NULL,
    version                 BIGINT UNSIGNED NOT NULL,
    created_at              DATETIME(3) NOT NULL,
    updated_at              DATETIME(3) NOT NULL,
    deleted_at              DATETIME(3) NULL,
    PRIMARY KEY (id),
    UNIQUE KEY daily_stats_user_day (user_id, day),
    UNIQUE KEY daily_stats_user_version (user_id, version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

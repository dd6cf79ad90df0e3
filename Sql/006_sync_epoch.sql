-- The identity of this database's history, carried by every pull cursor.
--
-- One row. The epoch is a random non-zero number made at install and replaced by every restore
-- from backup (`todosync new-epoch`, see README "Backup and restore"): a restore rewinds users'
-- change sequences, so a cursor handed out before it could name a position that new changes
-- reuse. A cursor whose epoch differs from this one gets 410 cursor_expired.

CREATE TABLE sync_epoch (
    id                     TINYINT UNSIGNED NOT NULL,
    epoch                  BIGINT UNSIGNED NOT NULL,
    renewed_at             DATETIME(3) NOT NULL,
    PRIMARY KEY (id),
    CONSTRAINT sync_epoch_one_row CHECK (id = 1),
    CONSTRAINT sync_epoch_not_zero CHECK (epoch <> 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

INSERT INTO sync_epoch (id, epoch, renewed_at)
VALUES (1, 1 + CAST(CONV(LEFT(SHA2(CONCAT(UUID(), RAND(), SYSDATE(6), CONNECTION_ID()), 256), 15), 16, 10) AS UNSIGNED),
        UTC_TIMESTAMP(3));

-- Push results keep a record once, not once per operation.
--
-- Every stored push result held the full record after its operation. A push of 500 no-op updates
-- of a todo whose `raw` was 2,000 `\u0001` stored 13.6 MB for a 67 KB request (203×; 1.36 GB per
-- account per hour kept 90 days). Now a result of any size stores its record in
-- sync_result_records, keyed by the SHA-256 of the record's bytes, and itself holds `null` in the
-- record's place and where that `null` starts (record_offset); a replay puts the bytes back, so it
-- answers exactly as first answered. 500 results naming one record version store it once.
-- A record row lives as long as the newest result naming it (last_used, refreshed on each use):
-- `todosync purge` removes rows unused for the retention horizon, after the results.

CREATE TABLE sync_result_records (
    user_id                BIGINT UNSIGNED NOT NULL,
    digest                 BINARY(32) NOT NULL,
    record                 MEDIUMBLOB NOT NULL,
    last_used              DATETIME(3) NOT NULL,
    PRIMARY KEY (user_id, digest),
    KEY sync_result_records_last_used (last_used)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

ALTER TABLE sync_operations
    ADD COLUMN record_digest BINARY(32) NULL,
    ADD COLUMN record_offset INT UNSIGNED NULL;

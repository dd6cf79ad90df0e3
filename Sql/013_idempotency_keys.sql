-- Idempotency-Key (contract, Conventions): a POST carrying the header is exactly-once per user.
--
-- One row per (user, key). A request claims its key before it runs (status 0 = running, with a
-- random `claim` number naming the request that owns it), then stores its answer in the same
-- transaction as the write it protects: a retry after a lost response gets that answer back
-- exactly; a retry while the first still runs gets 409 request_in_progress; the same key with
-- another method, path or body (another `fingerprint`, SHA-256) gets 422. A request that fails
-- drops its claim. Rows are kept at least 24 h (TODOSYNC_IDEMPOTENCY_RETENTION_HOURS); `todosync
-- purge` removes older ones. No foreign key to users on purpose: an insert here must not wait
-- for the user's row lock that a slow write holds (the duplicate must get its 409 at once).

CREATE TABLE idempotency_keys (
    user_id          BIGINT UNSIGNED NOT NULL,
    idem_key         VARBINARY(100) NOT NULL,
    fingerprint      BINARY(32) NOT NULL,
    claim            BIGINT NOT NULL,
    status           SMALLINT UNSIGNED NOT NULL DEFAULT 0,
    response_headers TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    response_body    MEDIUMBLOB NULL,
    created_at       DATETIME(3) NOT NULL,
    PRIMARY KEY (user_id, idem_key),
    KEY idempotency_keys_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Failed-login throttle keyed by the email, whether or not an account has it.
--
-- Throttling lived on the users row, so after 10 failures an existing email answered 429 while an
-- unknown one kept answering 401: a way to tell which emails have accounts. Now every email key
-- (SHA-256 of the NFC, lower-cased email) has its own counter, so both answer alike.
-- Rows of unknown emails are removed by `todosync purge` once their window has passed.

CREATE TABLE login_throttle (
    email_hash             BINARY(32) NOT NULL,
    failures               INT UNSIGNED NOT NULL DEFAULT 0,
    window_start           DATETIME(3) NULL,
    PRIMARY KEY (email_hash),
    KEY login_throttle_window (window_start)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- The old per-user counters are no longer read or written.
ALTER TABLE users DROP COLUMN failed_logins, DROP COLUMN failed_login_since;

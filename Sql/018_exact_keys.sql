-- Keys compared exactly: no trailing-space padding, no case folding where the contract says exact.
--
-- MariaDB's `_bin` collations are PAD SPACE: 'a' = 'a   '. The contract compares these exactly:
-- - users.email_key: an account's key (NFC, lower-cased, surrounding whitespace removed before
--   anything else). Under PAD SPACE, `victim@example.com   ` found the account while the
--   failed-login counter, keyed on the exact text, started from zero: a lockout bypass. With NO
--   PAD the only text that finds an account is its key, which is also what the counter hashes.
-- - sync_operations.op_key: opIds compare code point for code point (case, spaces and Unicode form
--   count). Rows stored before this migration hold the opId lower-cased (opIds used to compare
--   case-insensitively); `lowercased_key` marks them so a replay of such an opId still finds its
--   result until retention removes the row. New rows hold the opId exactly as sent.
-- - sync_devices.device_key: a deviceId names one local store, exactly as sent.
-- Unaffected: client_key (a UUID, no spaces possible), idempotency_keys.idem_key (VARBINARY
-- compares bytes without padding), tag names (never looked up by SQL).

ALTER TABLE users
    MODIFY email_key VARCHAR(254) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL;

ALTER TABLE sync_operations
    ADD COLUMN lowercased_key BOOLEAN NOT NULL DEFAULT TRUE,
    MODIFY op_key VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL;

ALTER TABLE sync_operations ALTER COLUMN lowercased_key SET DEFAULT FALSE;

ALTER TABLE sync_devices
    MODIFY device_key VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL;

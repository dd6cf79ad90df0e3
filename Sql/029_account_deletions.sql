-- Issue 34. Two changes to accounts, both online (a new table; a few rows updated).
--
-- 1. The journal of account deletions, so that a restore cannot bring a deleted account back
--    (contract: "erased for good within 24 hours"). `POST /account/delete` inserts a row in the
--    transaction that marks the account deleted (`SQL.Account.journalDeletion`); `todosync purge`
--    erases the account but never this row. `todosync-backup restore` reads the journal of the
--    database it is about to replace (and keeps it in the backup directory, `account-deletions.tsv`,
--    so a failed restore run does not lose it), imports the dump, puts the rows back and deletes
--    again every restored account the journal names (docs/OPERATIONS.md, "Restore").
--    A row holds no data of the account: only its id, when it was created (so that an id given
--    to someone else after a restore rewound the ids is never mistaken for it) and when it was
--    deleted. Its column is `account_id`, not `user_id`: the erase (`SQL.Erase`, checked by
--    test_account.py against every table with a `user_id`) removes an account's rows, and this
--    row is the one meant to outlive them.
CREATE TABLE IF NOT EXISTS account_deletions (
    account_id             BIGINT UNSIGNED NOT NULL,
    account_created_at     DATETIME(3) NOT NULL,
    deleted_at             DATETIME(3) NOT NULL,
    PRIMARY KEY (account_id, account_created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Accounts deleted before this migration and not yet erased by the purge.
INSERT IGNORE INTO account_deletions (account_id, account_created_at, deleted_at)
SELECT id, created_at, deleted_at FROM users WHERE deleted_at IS NOT NULL;

-- 2. Email keys with U+0130 (İ), made by the key function before this release, which kept İ
--    (its full lowercase mapping is two scalars); its simple lowercase mapping is `i`
--    (`CredentialsInput.simpleLowercase`). Re-keyed in place, except (left as they were):
--    - a key whose İ is followed by a combining mark (U+0300..U+036F, UTF-8 lead byte CC or CD):
--      `i` and the mark may compose under NFC, which SQL cannot apply;
--    - a key whose new form another account's key has, or would have (two accounts registered
--      before the fix): unique keys cannot merge accounts. docs/OPERATIONS.md ("Email keys") lists them.
UPDATE users u
   SET u.email_key = REPLACE(u.email_key, CHAR(0xC4B0 USING utf8mb4), 'i')
 WHERE u.deleted_at IS NULL
   AND LOCATE(CHAR(0xC4B0 USING utf8mb4), u.email_key) > 0
   AND HEX(u.email_key) NOT REGEXP 'C4B0C[CD]'
   AND NOT EXISTS (SELECT 1 FROM (SELECT id, email_key FROM users) o
                    WHERE o.id <> u.id
                      AND REPLACE(o.email_key, CHAR(0xC4B0 USING utf8mb4), 'i')
                          = REPLACE(u.email_key, CHAR(0xC4B0 USING utf8mb4), 'i'));

-- Issue 34. Accounts: email keys with U+0130 re-keyed (below); and, in the same file, the journal
-- of account deletions (added by the next change).
--
-- Email keys with U+0130 (İ), made by the key function before this release, which kept İ
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

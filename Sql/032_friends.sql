-- Issue 37: friends (contract "Friends"; docs/FRIENDS.md). Three new tables and one column, all
-- online (new tables; an instant column).
--
-- 1. The account's nickname (GET/PATCH /account): 1-40 Unicode scalars, NULL until set.
ALTER TABLE users ADD COLUMN nickname VARCHAR(40) NULL, ALGORITHM=INSTANT;

-- 2. Friend requests, addressed to an email (its key, `CredentialsInput.emailKey`), not to an
--    account: an account registered with the email while a request is pending sees it (the
--    incoming list joins by `email_key`, in users.email_key's collation, Sql/018). One row per (sender, email key): a repeat changes
--    nothing, a repeat after expiry starts the request afresh. `user_id` is the sender (the
--    erase of a deleted account removes what it sent, by this column).
--    * email: as the sender gave it (trimmed, NFC): what their outgoing list shows.
--    * expires_at: exactly 30 days after created_at; reads list only rows with expires_at > now,
--      the purge deletes the rest (it never decides expiry).
--    * closed_at: set when the recipient declined it, or when the account that had the email was
--      deleted: the recipient's incoming list no longer shows it (an account registered later with
--      the email does not receive it either), while to its sender it stays pending, listed and
--      cancellable until it expires.
CREATE TABLE friend_requests (
    id                     BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    user_id                BIGINT UNSIGNED NOT NULL,
    email                  VARCHAR(254) NOT NULL,
    email_key              VARCHAR(254) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
    created_at             DATETIME(3) NOT NULL,
    expires_at             DATETIME(3) NOT NULL,
    closed_at              DATETIME(3) NULL,
    PRIMARY KEY (id),
    UNIQUE KEY friend_requests_sender (user_id, email_key),
    KEY friend_requests_recipient (email_key, expires_at),
    KEY friend_requests_expiry (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- 3. Friendships: one row per direction, so a user's friends are one range read of their
--    rows and the 500-friend limit is a count of them; both rows are written and deleted together
--    (friend_id's index: an account delete removes the rows that name it).
CREATE TABLE friendships (
    user_id                BIGINT UNSIGNED NOT NULL,
    friend_id              BIGINT UNSIGNED NOT NULL,
    since                  DATETIME(3) NOT NULL,
    PRIMARY KEY (user_id, friend_id),
    KEY friendships_friend (friend_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- 4. Each 202 of POST /friends/requests, for the limit of 20 in any 60 minutes (a sliding
--    window: the rows of the last hour are counted, under the sender's row lock). The purge
--    deletes rows older than an hour.
CREATE TABLE friend_request_sends (
    id                     BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    user_id                BIGINT UNSIGNED NOT NULL,
    sent_at                DATETIME(3) NOT NULL,
    PRIMARY KEY (id),
    KEY friend_request_sends_user (user_id, sent_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

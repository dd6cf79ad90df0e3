-- TodoSync schema, version 1: users, tokens, tags, todos.
--
-- Every synced row carries a `version` taken from its owner's change sequence
-- (users.change_seq), allocated inside the write transaction while the user's row is locked,
-- so version order is commit order for that user. Deletes are soft (deleted_at set).
-- client_key is the lower-cased clientId: clientIds compare case-insensitively but are kept
-- (client_id) as first given.

CREATE TABLE users (
    id                     BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    email                  VARCHAR(254) NOT NULL,
    email_key              VARCHAR(254) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    password_hash          VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    change_seq             BIGINT UNSIGNED NOT NULL DEFAULT 0,
    failed_logins          INT UNSIGNED NOT NULL DEFAULT 0,
    failed_login_since     DATETIME(3) NULL,
    created_at             DATETIME(3) NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY users_email_key (email_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE auth_tokens (
    token_hash             BINARY(32) NOT NULL,
    user_id                BIGINT UNSIGNED NOT NULL,
    created_at             DATETIME(3) NOT NULL,
    expires_at             DATETIME(3) NOT NULL,
    PRIMARY KEY (token_hash),
    KEY auth_tokens_user (user_id),
    KEY auth_tokens_expiry (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE tags (
    id                     BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    user_id                BIGINT UNSIGNED NOT NULL,
    client_id              VARCHAR(36) CHARACTER SET ascii COLLATE ascii_bin NULL,
    client_key             VARCHAR(36) CHARACTER SET ascii COLLATE ascii_bin NULL,
    name                   VARCHAR(50) NOT NULL,
    color                  CHAR(7) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    version                BIGINT UNSIGNED NOT NULL,
    created_at             DATETIME(3) NOT NULL,
    updated_at             DATETIME(3) NOT NULL,
    deleted_at             DATETIME(3) NULL,
    PRIMARY KEY (id),
    UNIQUE KEY tags_user_client (user_id, client_key),
    UNIQUE KEY tags_user_version (user_id, version),
    KEY tags_user_live (user_id, deleted_at, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE todos (
    id                     BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    user_id                BIGINT UNSIGNED NOT NULL,
    client_id              VARCHAR(36) CHARACTER SET ascii COLLATE ascii_bin NULL,
    client_key             VARCHAR(36) CHARACTER SET ascii COLLATE ascii_bin NULL,
    title                  VARCHAR(200) NOT NULL,
    raw                    VARCHAR(2000) NOT NULL,
    is_important           TINYINT(1) NOT NULL DEFAULT 0,
    is_life                TINYINT(1) NOT NULL DEFAULT 0,
    tag_id                 BIGINT UNSIGNED NULL,
    difficulty             TINYINT UNSIGNED NOT NULL DEFAULT 0,
    estimated_time         SMALLINT UNSIGNED NOT NULL DEFAULT 0,
    deadline               DATE NOT NULL,
    is_completed           TINYINT(1) NOT NULL DEFAULT 0,
    version                BIGINT UNSIGNED NOT NULL,
    created_at             DATETIME(3) NOT NULL,
    updated_at             DATETIME(3) NOT NULL,
    deleted_at             DATETIME(3) NULL,
    PRIMARY KEY (id),
    UNIQUE KEY todos_user_client (user_id, client_key),
    UNIQUE KEY todos_user_version (user_id, version),
    -- Serves both "by date" and "by range" listings in the contract's order, without a filesort.
    KEY todos_user_day_order (user_id, deleted_at, deadline, is_important DESC, created_at DESC, title),
    KEY todos_user_tag (user_id, tag_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

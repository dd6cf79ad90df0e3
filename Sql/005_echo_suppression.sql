-- Echo suppression: which device made each record's latest change.
--
-- sync_devices numbers the deviceIds a user has pushed with (exact text, as sent). tags and todos
-- record the number of the device whose pushed operation made their current version, or NULL
-- when the change came from a REST call or was derived by the server (a todo un-tagged by a tag
-- delete). Daily stats are always derived, so they have no such column. `GET /sync/pull` with a
-- deviceId leaves out records whose changed_by_device is that device.

CREATE TABLE sync_devices (
    id                     BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    user_id                BIGINT UNSIGNED NOT NULL,
    device_key             VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    created_at             DATETIME(3) NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY sync_devices_user_key (user_id, device_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

ALTER TABLE tags ADD COLUMN changed_by_device BIGINT UNSIGNED NULL;

ALTER TABLE todos ADD COLUMN changed_by_device BIGINT UNSIGNED NULL;

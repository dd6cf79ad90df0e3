-- GET /todos?date= with gzip sends what the write stored (issue 25): each stored day list also
-- kept compressed, as the whole response body (`{"items":[` body `]}`, what the route answers),
-- so that a client that accepts gzip costs the responder no compression per request.
--   * compressed: MariaDB's COMPRESS() of that body (its length in 4 bytes, then a zlib stream);
--     the responder sends the deflate stream inside as a gzip member (`GzipMember`).
--   * crc: CRC32() of that body, the member's trailer.
-- Generated from the body, so every write of it keeps them (a responder of the previous release
-- too), a NULL body (not stored) has neither, and the list is concatenated once per rebuild.
-- `SQL.TodoDays.responsePrefix` and `responseSuffix` name the same bytes (check-feed compares).
--
-- Computed here for every stored body: zlib's level 6, about 30 µs per 5 KB list.

ALTER TABLE todo_days
    ADD COLUMN compressed MEDIUMBLOB AS (COMPRESS(CONCAT('{"items":[', body, ']}'))) STORED,
    ADD COLUMN crc INT UNSIGNED AS (CRC32(CONCAT('{"items":[', body, ']}'))) STORED;

-- GET /todos?date= with gzip sends what the write stored (issue 25): each stored day list also
-- kept compressed, as the whole response body (`{"items":[` body `]}`), so that a client that
-- accepts gzip costs the responder no compression per request.
--   * compressed: MariaDB's COMPRESS() of that body (its length in 4 bytes, then a zlib stream);
--     the responder sends the deflate stream inside as a gzip member (`GzipMember`).
--   * crc: CRC32() of that body, the member's trailer.
-- Both are written with `body` by the rebuild (`SQL.TodoDays.rebuild`) and cleared with it
-- (`unstore`); a read uses them only beside a stored body, so a row that a responder of the
-- previous release marked not stored (body NULL, these left) is never served from them.
--
-- Not back-filled: a row without them answers gzip clients as before (compressed per request)
-- until its next small write or `todosync rebuild-feed` (docs/OPERATIONS.md).

ALTER TABLE todo_days
    ADD COLUMN compressed MEDIUMBLOB NULL,
    ADD COLUMN crc INT UNSIGNED NULL;

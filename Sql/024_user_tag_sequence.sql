-- Each account's latest tag version, kept by the write path, so that a pull page can skip its
-- parent-tag lookup when no tag can have changed after the page's start (issue 25).
--
-- A pull page sends the live tags its todos and stats refer to whose version is greater than the
-- page's start (`SQL.Feed.parentTags`). After the first page that lookup almost never finds one
-- (tags rarely change) yet costs ~45 unique-key probes of sync_feed per page. users.tag_seq is at
-- least the version of every tag of the user, live or deleted: a page whose start is at or above
-- it skips the lookup (`Store.pull`). A tag's feed row carries the tag's own version (tags.version,
-- one number from the user's change sequence), so the highest version in tags is the highest tag
-- version the feed can hold. Too high only costs a lookup; too low would leave a parent tag out.
--
-- The write transaction raises it in the UPDATE of the users row it already runs at commit
-- (`SQL.Users.saveChangeSequence`); `todosync rebuild-feed` raises it from the tables, and
-- `todosync check-feed` reports a user whose tag_seq is below a tag's version.
--
-- Responders of the previous release still running after this file change tags without raising
-- it: once they are all replaced, run `todosync rebuild-feed` (docs/OPERATIONS.md). Back-filled
-- below from every tag, deleted ones included.

ALTER TABLE users ADD COLUMN tag_seq BIGINT UNSIGNED NOT NULL DEFAULT 0;

UPDATE users u
  JOIN (SELECT user_id, MAX(version) AS latest FROM tags GROUP BY user_id) t ON t.user_id = u.id
   SET u.tag_seq = t.latest
 WHERE u.tag_seq < t.latest;

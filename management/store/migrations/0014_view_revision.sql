-- view_rev counts the changes to what the REST API shows of an account's
-- peers, groups and policies beyond its network serial: a peer's stored fields
-- (metadata, login time, name...) change without a new network map.
-- Connection state (connected, last_seen) does not count: it changes all
-- the time and is read fresh. Caches of the peer list key on it.
ALTER TABLE accounts ADD COLUMN view_rev BIGINT NOT NULL DEFAULT 0;

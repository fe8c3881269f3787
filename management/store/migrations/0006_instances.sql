-- Management instances sharing the store: each one that holds Sync streams
-- keeps a heartbeat here, and a connected peer names the instance holding
-- its stream, so peers of an instance that died are known to be offline.
CREATE TABLE instances (
  id         TEXT PRIMARY KEY,
  started_at BIGINT NOT NULL,
  heartbeat  BIGINT NOT NULL
);

ALTER TABLE peers ADD COLUMN conn_instance TEXT NOT NULL DEFAULT '';

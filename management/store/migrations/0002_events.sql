-- The activity log: what changed in an account, by whom.
CREATE TABLE events (
  account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  seq         BIGINT NOT NULL,
  at          BIGINT NOT NULL,
  activity    TEXT NOT NULL,
  initiator   TEXT NOT NULL DEFAULT '',
  target      TEXT NOT NULL DEFAULT '',
  meta        TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY (account_id, seq)
);

-- Peers of a setup key, for usage accounting and export.
CREATE INDEX peers_setup_key ON peers (setup_key_id);
CREATE INDEX setup_keys_account ON setup_keys (account_id);
CREATE INDEX peers_account ON peers (account_id, created_at);

CREATE TABLE accounts (
  id          TEXT PRIMARY KEY,
  domain      TEXT NOT NULL,
  network     TEXT NOT NULL,
  serial      BIGINT NOT NULL DEFAULT 0,
  created_at  BIGINT NOT NULL
);

CREATE TABLE peers (
  id           TEXT PRIMARY KEY,
  account_id   TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  wg_pub_key   TEXT NOT NULL UNIQUE,
  ip           TEXT NOT NULL,
  name         TEXT NOT NULL,
  dns_label    TEXT NOT NULL,
  meta         TEXT NOT NULL DEFAULT '{}',
  ssh_pub_key  TEXT NOT NULL DEFAULT '',
  setup_key_id TEXT NOT NULL DEFAULT '',
  ephemeral    BOOLEAN NOT NULL DEFAULT FALSE,
  created_at   BIGINT NOT NULL,
  last_login   BIGINT NOT NULL,
  last_seen    BIGINT NOT NULL,
  connected    BOOLEAN NOT NULL DEFAULT FALSE,
  UNIQUE (account_id, ip),
  UNIQUE (account_id, dns_label)
);

CREATE TABLE setup_keys (
  id           TEXT PRIMARY KEY,
  account_id   TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  name         TEXT NOT NULL,
  key_hash     TEXT NOT NULL UNIQUE,
  key_prefix   TEXT NOT NULL,
  reusable     BOOLEAN NOT NULL,
  usage_limit  INTEGER NOT NULL DEFAULT 0,
  used_times   INTEGER NOT NULL DEFAULT 0,
  expires_at   BIGINT NOT NULL DEFAULT 0,
  revoked      BOOLEAN NOT NULL DEFAULT FALSE,
  auto_groups  TEXT NOT NULL DEFAULT '[]',
  ephemeral    BOOLEAN NOT NULL DEFAULT FALSE,
  created_at   BIGINT NOT NULL,
  last_used    BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE settings (
  name   TEXT PRIMARY KEY,
  value  TEXT NOT NULL
);

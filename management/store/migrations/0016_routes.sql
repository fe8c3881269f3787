-- Routes and networks: what makes networks beyond the overlay reachable
-- through routing peers. Group lists are JSON arrays of group IDs, as
-- peer_groups.peers is (group_ids, because GROUPS is an SQL keyword); a
-- route's network is '' when it routes domains instead. Deleting a
-- network removes its resources and routers.
CREATE TABLE routes (
  id                    TEXT PRIMARY KEY,
  account_id            TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  net_id                TEXT NOT NULL,
  description           TEXT NOT NULL DEFAULT '',
  enabled               BOOLEAN NOT NULL DEFAULT TRUE,
  peer                  TEXT NOT NULL DEFAULT '',
  peer_groups           TEXT NOT NULL DEFAULT '[]',
  network               TEXT NOT NULL DEFAULT '',
  domains               TEXT NOT NULL DEFAULT '[]',
  keep_route            BOOLEAN NOT NULL DEFAULT FALSE,
  metric                INTEGER NOT NULL DEFAULT 9999,
  masquerade            BOOLEAN NOT NULL DEFAULT FALSE,
  group_ids             TEXT NOT NULL DEFAULT '[]',
  access_control_groups TEXT NOT NULL DEFAULT '[]',
  skip_auto_apply       BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX routes_account ON routes (account_id);

CREATE TABLE networks (
  id          TEXT PRIMARY KEY,
  account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  name        TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT ''
);
CREATE INDEX networks_account ON networks (account_id);

-- Resource names are unique in an account, as NetBird requires.
CREATE TABLE network_resources (
  id          TEXT PRIMARY KEY,
  account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  network_id  TEXT NOT NULL REFERENCES networks(id) ON DELETE CASCADE,
  name        TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  type        TEXT NOT NULL,
  address     TEXT NOT NULL,
  prefix      TEXT NOT NULL DEFAULT '',
  domain      TEXT NOT NULL DEFAULT '',
  enabled     BOOLEAN NOT NULL DEFAULT TRUE,
  group_ids   TEXT NOT NULL DEFAULT '[]',
  UNIQUE (account_id, name)
);
CREATE INDEX network_resources_network ON network_resources (network_id);

CREATE TABLE network_routers (
  id          TEXT PRIMARY KEY,
  account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  network_id  TEXT NOT NULL REFERENCES networks(id) ON DELETE CASCADE,
  peer        TEXT NOT NULL DEFAULT '',
  peer_groups TEXT NOT NULL DEFAULT '[]',
  metric      INTEGER NOT NULL DEFAULT 9999,
  masquerade  BOOLEAN NOT NULL DEFAULT FALSE,
  enabled     BOOLEAN NOT NULL DEFAULT TRUE
);
CREATE INDEX network_routers_network ON network_routers (network_id);
CREATE INDEX network_routers_account ON network_routers (account_id);
CREATE INDEX network_resources_account ON network_resources (account_id);

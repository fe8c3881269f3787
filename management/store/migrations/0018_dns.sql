-- DNS for the mesh: nameserver groups (split DNS or primary upstreams),
-- the account's DNS settings and custom zones with their records. Group
-- lists are JSON arrays of group IDs (group_ids, because GROUPS is an SQL
-- keyword), nameservers a JSON array of {ip, ns_type, port} and domains a
-- JSON array of punycode names. Deleting a zone removes its records.
CREATE TABLE nameserver_groups (
  id                     TEXT PRIMARY KEY,
  account_id             TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  name                   TEXT NOT NULL,
  description            TEXT NOT NULL DEFAULT '',
  nameservers            TEXT NOT NULL DEFAULT '[]',
  enabled                BOOLEAN NOT NULL DEFAULT TRUE,
  group_ids              TEXT NOT NULL DEFAULT '[]',
  is_primary             BOOLEAN NOT NULL DEFAULT FALSE,
  domains                TEXT NOT NULL DEFAULT '[]',
  search_domains_enabled BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX nameserver_groups_account ON nameserver_groups (account_id);

-- One row per account that ever saved its DNS settings.
CREATE TABLE dns_settings (
  account_id                 TEXT PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
  disabled_management_groups TEXT NOT NULL DEFAULT '[]'
);

-- A zone's domain is unique in its account.
CREATE TABLE dns_zones (
  id                   TEXT PRIMARY KEY,
  account_id           TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  name                 TEXT NOT NULL,
  domain               TEXT NOT NULL,
  enable_search_domain BOOLEAN NOT NULL DEFAULT FALSE,
  group_ids            TEXT NOT NULL DEFAULT '[]',
  enabled              BOOLEAN NOT NULL DEFAULT TRUE,
  UNIQUE (account_id, domain)
);

CREATE TABLE dns_records (
  id         TEXT PRIMARY KEY,
  account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  zone_id    TEXT NOT NULL REFERENCES dns_zones(id) ON DELETE CASCADE,
  name       TEXT NOT NULL,
  type       TEXT NOT NULL,
  content    TEXT NOT NULL,
  ttl        INTEGER NOT NULL DEFAULT 300
);
CREATE INDEX dns_records_zone ON dns_records (zone_id);
CREATE INDEX dns_records_account ON dns_records (account_id);

-- Access control: groups of peers and the policies between them. Every
-- account gets the built-in All group and the Default All-to-All policy,
-- as a new account does.
CREATE TABLE peer_groups (
  id          TEXT PRIMARY KEY,
  account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  name        TEXT NOT NULL,
  is_all      BOOLEAN NOT NULL DEFAULT FALSE,
  peers       TEXT NOT NULL DEFAULT '[]',
  UNIQUE (account_id, name)
);

CREATE TABLE policies (
  id          TEXT PRIMARY KEY,
  account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  name        TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  enabled     BOOLEAN NOT NULL DEFAULT TRUE,
  rules       TEXT NOT NULL DEFAULT '[]'
);

CREATE INDEX policies_account ON policies (account_id);

INSERT INTO peer_groups (id, account_id, name, is_all, peers)
  SELECT 'all-' || id, id, 'All', TRUE, '[]' FROM accounts;

INSERT INTO policies (id, account_id, name, description, enabled, rules)
  SELECT 'default-' || id, id, 'Default', 'This is a default rule that allows connections between all the resources', TRUE,
    '[{"id":"default-' || id || '","name":"Default","enabled":true,"action":"accept","protocol":"all","bidirectional":true,"sources":["all-' || id || '"],"destinations":["all-' || id || '"]}]'
  FROM accounts;

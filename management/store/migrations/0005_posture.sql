-- Posture checks: conditions a source peer must meet for a policy to
-- apply to it; policies name the checks they require.
CREATE TABLE posture_checks (
  id          TEXT PRIMARY KEY,
  account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  name        TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  checks      TEXT NOT NULL DEFAULT '{}',
  UNIQUE (account_id, name)
);

ALTER TABLE policies ADD COLUMN posture_checks TEXT NOT NULL DEFAULT '[]';

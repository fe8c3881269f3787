-- Identity: users of an account, their personal access tokens, invitations
-- and the built-in identity provider's local credentials; peers remember
-- the user who added them; accounts get settings (login expiration, JWT
-- group sync) as a JSON document.
ALTER TABLE accounts ADD COLUMN settings TEXT NOT NULL DEFAULT '{"peer_login_expiration_enabled":true,"peer_login_expiration":86400}';

-- The e-mail domain whose new users join this account (multi-account mode).
ALTER TABLE accounts ADD COLUMN user_domain TEXT NOT NULL DEFAULT '';
CREATE INDEX accounts_user_domain ON accounts (user_domain);

ALTER TABLE peers ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
ALTER TABLE peers ADD COLUMN login_expiration_enabled BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX peers_user ON peers (account_id, user_id);

CREATE TABLE users (
  id            TEXT PRIMARY KEY,
  account_id    TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  email         TEXT NOT NULL DEFAULT '',
  name          TEXT NOT NULL DEFAULT '',
  role          TEXT NOT NULL,
  blocked       BOOLEAN NOT NULL DEFAULT FALSE,
  service_user  BOOLEAN NOT NULL DEFAULT FALSE,
  auto_groups   TEXT NOT NULL DEFAULT '[]',
  issued        TEXT NOT NULL DEFAULT 'api',
  created_at    BIGINT NOT NULL,
  last_login    BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX users_account ON users (account_id, created_at);

CREATE TABLE personal_access_tokens (
  id          TEXT PRIMARY KEY,
  account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  name        TEXT NOT NULL,
  token_hash  TEXT NOT NULL UNIQUE,
  expires_at  BIGINT NOT NULL,
  created_by  TEXT NOT NULL,
  created_at  BIGINT NOT NULL,
  last_used   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX pats_user ON personal_access_tokens (account_id, user_id);

CREATE TABLE invites (
  id          TEXT PRIMARY KEY,
  account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  email       TEXT NOT NULL,
  name        TEXT NOT NULL,
  role        TEXT NOT NULL,
  auto_groups TEXT NOT NULL DEFAULT '[]',
  token_hash  TEXT NOT NULL UNIQUE,
  expires_at  BIGINT NOT NULL,
  created_by  TEXT NOT NULL,
  created_at  BIGINT NOT NULL
);
CREATE UNIQUE INDEX invites_email ON invites (account_id, LOWER(email));

-- The built-in identity provider's users (not bound to an account: the
-- provider authenticates, management decides the account).
CREATE TABLE local_credentials (
  subject       TEXT PRIMARY KEY,
  email         TEXT NOT NULL,
  name          TEXT NOT NULL,
  password_hash TEXT NOT NULL,
  created_at    BIGINT NOT NULL
);
CREATE UNIQUE INDEX local_credentials_email ON local_credentials (LOWER(email));

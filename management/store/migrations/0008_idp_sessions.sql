-- Refresh tokens of the built-in identity provider, by the SHA-256 of the
-- token (the token itself is never stored). Every use rotates: the used
-- row stays (used_at set) so that presenting it again is recognised as
-- reuse, which revokes its whole family (one login). access_jti is the
-- latest access token issued from the family, revoked with it.
CREATE TABLE refresh_tokens (
  hash              TEXT PRIMARY KEY,
  family            TEXT NOT NULL,
  subject           TEXT NOT NULL,
  client_id         TEXT NOT NULL,
  scopes            TEXT NOT NULL DEFAULT '[]',
  amr               TEXT NOT NULL DEFAULT '[]',
  auth_time         BIGINT NOT NULL,
  created_at        BIGINT NOT NULL,
  expires_at        BIGINT NOT NULL,
  family_expires_at BIGINT NOT NULL,
  used_at           BIGINT NOT NULL DEFAULT 0,
  access_jti        TEXT NOT NULL DEFAULT '',
  access_expires_at BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX refresh_tokens_family ON refresh_tokens (family);
CREATE INDEX refresh_tokens_subject ON refresh_tokens (subject, client_id);
CREATE INDEX refresh_tokens_expiry ON refresh_tokens (family_expires_at);

-- Upstream OpenID Connect providers an account's admin added to the
-- built-in provider's login page. The client secret is stored to talk to
-- the provider and never returned by the API.
CREATE TABLE identity_providers (
  id            TEXT PRIMARY KEY,
  account_id    TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  type          TEXT NOT NULL,
  name          TEXT NOT NULL,
  issuer        TEXT NOT NULL,
  client_id     TEXT NOT NULL,
  client_secret TEXT NOT NULL DEFAULT '',
  created_at    BIGINT NOT NULL
);
CREATE INDEX identity_providers_account ON identity_providers (account_id);

-- Which user of the account an upstream provider's subject logs in as.
CREATE TABLE idp_links (
  provider_id      TEXT NOT NULL REFERENCES identity_providers(id) ON DELETE CASCADE,
  upstream_subject TEXT NOT NULL,
  user_id          TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  PRIMARY KEY (provider_id, upstream_subject)
);
CREATE INDEX idp_links_user ON idp_links (user_id);

-- TOTP second factors of the built-in provider's local logins. The secret
-- is kept to verify codes; recovery holds the SHA-256 of each unused
-- recovery code; last_step is the last accepted time step (a code is not
-- accepted twice). Unconfirmed rows are enrolments in progress.
CREATE TABLE totp_factors (
  subject    TEXT PRIMARY KEY,
  secret     TEXT NOT NULL,
  confirmed  BOOLEAN NOT NULL DEFAULT FALSE,
  recovery   TEXT NOT NULL DEFAULT '[]',
  last_step  BIGINT NOT NULL DEFAULT 0,
  created_at BIGINT NOT NULL
);

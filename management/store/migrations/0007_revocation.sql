-- Access ends at once when a user is deleted or blocked: a token issued to
-- a subject at or before its revoked_at here is refused, and a deleted
-- subject is not created again by such a token.
CREATE TABLE revoked_subjects (
  subject    TEXT PRIMARY KEY,
  revoked_at BIGINT NOT NULL
);

-- Access tokens of the built-in identity provider revoked before they
-- expire (by jti), shared by every management instance on the store.
CREATE TABLE revoked_tokens (
  jti        TEXT PRIMARY KEY,
  subject    TEXT NOT NULL,
  expires_at BIGINT NOT NULL
);
CREATE INDEX revoked_tokens_expiry ON revoked_tokens (expires_at);

-- Whether the identity provider vouched for the user's e-mail address
-- (email_verified) when it was last seen.
ALTER TABLE users ADD COLUMN email_verified BOOLEAN NOT NULL DEFAULT FALSE;

-- A domain an account's admin claimed: verified addresses of it join the
-- account in domain mode. One account per claimed domain.
ALTER TABLE accounts ADD COLUMN user_domain_claimed BOOLEAN NOT NULL DEFAULT FALSE;
CREATE UNIQUE INDEX accounts_claimed_domain ON accounts (user_domain) WHERE user_domain_claimed;

-- Password links of the built-in identity provider: an invitation e-mail
-- sent to a user who exists but has never logged in carries a single-use
-- link that sets the user's password. One per user (a new one replaces
-- the old, which stops working); only the SHA-256 of the token is kept.
-- It goes with its user and its account.
CREATE TABLE password_links (
  subject     TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
  account_id  TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  token_hash  TEXT NOT NULL UNIQUE,
  expires_at  BIGINT NOT NULL,
  created_by  TEXT NOT NULL,
  created_at  BIGINT NOT NULL
);
CREATE INDEX password_links_account ON password_links (account_id);

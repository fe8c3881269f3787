-- User approval: a user who joins an account by its e-mail domain while
-- the account's settings.extra.user_approval_required is on waits, able to
-- do nothing, until an admin approves (or rejects) it.
ALTER TABLE users ADD COLUMN pending_approval BOOLEAN NOT NULL DEFAULT FALSE;

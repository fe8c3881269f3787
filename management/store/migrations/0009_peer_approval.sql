-- Peer approval: a peer that registered while its account's
-- settings.extra.peer_approval_enabled was on stays pending (out of every
-- network map) until an admin approves it.
ALTER TABLE peers ADD COLUMN approval_required BOOLEAN NOT NULL DEFAULT FALSE;

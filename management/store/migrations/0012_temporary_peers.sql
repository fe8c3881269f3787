-- Temporary peers (POST /api/peers/{peerId}/temporary-access): a peer an
-- admin creates for the dashboard's in-browser SSH/RDP client. It belongs
-- to no group (not even All) and reaches only the target peer through the
-- policies made for it; it and those policies go when its Sync stream ends
-- or when it stays offline past the deadline.
ALTER TABLE peers ADD COLUMN temporary BOOLEAN NOT NULL DEFAULT FALSE;

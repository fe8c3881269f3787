-- ssh_enabled is the admin's per-peer SSH switch (PUT /api/peers/{id}
-- ssh_enabled): management sends it to the peer as SSHConfig.sshEnabled and
-- the agent runs its SSH server only when this and its own
-- --allow-server-ssh are both on, as NetBird does.
ALTER TABLE peers ADD COLUMN ssh_enabled BOOLEAN NOT NULL DEFAULT FALSE;

-- IPv6 overlay. accounts.network_v6 is the account's random ULA /64
-- (RFC 4193: fd, a 40-bit global ID and a 16-bit subnet ID). Accounts that
-- exist at the upgrade get one now, so turning IPv6 on later needs no
-- address plan; their settings.ipv6_enabled_groups stays absent (empty),
-- so no peer gets an IPv6 address until an admin names groups, as NetBird
-- leaves upgraded accounts. New accounts name the All group (tenant.Create).
-- peers.ipv6 is '' for a peer without an IPv6 address; the others are
-- unique per account.
ALTER TABLE accounts ADD COLUMN network_v6 TEXT NOT NULL DEFAULT '';
-- randomblob is evaluated per row and per call, so every account gets its
-- own prefix.
UPDATE accounts SET network_v6 = 'fd' || lower(hex(randomblob(1))) || ':' || lower(hex(randomblob(2))) || ':' ||
  lower(hex(randomblob(2))) || ':' || lower(hex(randomblob(2))) || '::/64';
ALTER TABLE peers ADD COLUMN ipv6 TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX peers_ipv6 ON peers (account_id, ipv6) WHERE ipv6 <> '';

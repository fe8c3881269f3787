-- The REST peer list reads every peer's connection state on each request
-- (it changes without a view revision), in the order it lists the peers:
-- this index covers that read (AccountTx.EachPeerState), so it walks a few
-- hundred index pages in order instead of looking up every wide peer row.
CREATE INDEX peers_state ON peers (account_id, created_at, id, connected, last_seen);

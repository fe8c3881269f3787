package store

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/wiremesh/wiremesh/management/account"
)

// AccountTx is a transaction (or read) confined to one account: every query
// it runs carries the account's ID in its WHERE clause, so a caller holding
// one account's AccountTx cannot read or change another account's rows,
// whatever IDs it passes.
type AccountTx struct {
	tx *Tx
	id account.ID
}

// In confines tx to one account.
func (tx *Tx) In(id account.ID) *AccountTx { return &AccountTx{tx: tx, id: id} }

// ID is the account this view is confined to.
func (a *AccountTx) ID() account.ID { return a.id }

func (a *AccountTx) q() querier { return a.tx.q }

// Account reads the account row.
func (a *AccountTx) Account(ctx context.Context) (account.Account, error) {
	return scanAccount(a.q().queryRow(ctx, `SELECT `+accountCols+` FROM accounts WHERE id = ?`, string(a.id)))
}

// Lock reads the account and makes other writers of it wait until the
// transaction ends, for changes that read before they write.
func (a *AccountTx) Lock(ctx context.Context) (account.Account, error) {
	return scanAccount(a.q().queryRow(ctx, `SELECT `+accountCols+` FROM accounts WHERE id = ?`+a.tx.eng.forUpdate(), string(a.id)))
}

// BumpSerial increments and returns the account's network serial. Because it
// is persisted, serials stay monotonic across restarts.
func (a *AccountTx) BumpSerial(ctx context.Context) (uint64, error) {
	var s int64
	err := a.q().queryRow(ctx, `UPDATE accounts SET serial = serial + 1 WHERE id = ? RETURNING serial`, string(a.id)).Scan(&s)
	if err != nil {
		return 0, mapErr(err)
	}
	if a.tx.eng.name() == Postgres {
		// Delivered to every listening instance when (and only if) the
		// transaction commits.
		if _, err := a.q().exec(ctx, `SELECT pg_notify(?, ?)`, ChangeChannel, changePayload(a.id, uint64(s))); err != nil {
			return 0, mapErr(err)
		}
	}
	return uint64(s), nil
}

// --- peers ---

// Peers lists the account's peers, oldest first.
func (a *AccountTx) Peers(ctx context.Context) ([]account.Peer, error) {
	return queryAll(ctx, a.q(), scanPeer, `SELECT `+peerCols+` FROM peers WHERE account_id = ? ORDER BY created_at, id`, string(a.id))
}

// Peer finds one of the account's peers by ID.
func (a *AccountTx) Peer(ctx context.Context, id account.PeerID) (account.Peer, error) {
	return scanPeer(a.q().queryRow(ctx, `SELECT `+peerCols+` FROM peers WHERE id = ? AND account_id = ?`, string(id), string(a.id)))
}

func (a *AccountTx) owns(what string, acc account.ID) error {
	if acc != a.id {
		return fmt.Errorf("%s belongs to account %q, not %q", what, acc, a.id)
	}
	return nil
}

// InsertPeer adds a peer. A duplicate key, IP or DNS label gives ErrConflict.
func (a *AccountTx) InsertPeer(ctx context.Context, p account.Peer) error {
	if err := a.owns("peer", p.AccountID); err != nil {
		return err
	}
	args, err := peerArgs(p)
	if err != nil {
		return err
	}
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	_, err = a.q().exec(ctx, `INSERT INTO peers (`+peerCols+`) VALUES (`+peerValues+`)`, args...)
	return mapErr(err)
}

// InsertPeerIfFree adds a peer unless its key, address or DNS label is
// taken, also by a concurrent transaction (which it waits for); it reports
// whether the peer was added. Unlike InsertPeer it leaves the transaction
// usable on a conflict, so the caller can pick another address or label.
func (a *AccountTx) InsertPeerIfFree(ctx context.Context, p account.Peer) (bool, error) {
	if err := a.owns("peer", p.AccountID); err != nil {
		return false, err
	}
	args, err := peerArgs(p)
	if err != nil {
		return false, err
	}
	if err := a.bumpView(ctx); err != nil {
		return false, err
	}
	n, err := a.q().exec(ctx, `INSERT INTO peers (`+peerCols+`) VALUES (`+peerValues+`) ON CONFLICT DO NOTHING`, args...)
	if err != nil {
		return false, mapErr(err)
	}
	return n == 1, nil
}

// UpdatePeer rewrites a peer's mutable fields.
func (a *AccountTx) UpdatePeer(ctx context.Context, p account.Peer) error {
	meta, err := json.Marshal(p.Meta)
	if err != nil {
		return err
	}
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `UPDATE peers SET wg_pub_key = ?, ip = ?, name = ?, dns_label = ?, meta = ?, ssh_pub_key = ?, last_login = ?, last_seen = ?, connected = ?, login_expiration_enabled = ? WHERE id = ? AND account_id = ?`,
		p.Key.String(), p.IP.String(), p.Name, p.DNSLabel, string(meta), p.SSHPubKey, nanos(p.LastLogin), nanos(p.LastSeen), p.Connected, p.LoginExpirationEnabled, string(p.ID), string(a.id))
	return affected(n, err)
}

// SetPeerConnected records that a peer's Sync stream is open on the given
// management instance, or that it closed. A close counts only if the
// peer's stream is still recorded on that instance: after a peer moved to
// another instance, the old one's late close must not mark it offline
// (ErrNotFound then, as for a deleted peer).
func (a *AccountTx) SetPeerConnected(ctx context.Context, id account.PeerID, connected bool, seen int64, instance string) error {
	if connected {
		n, err := a.q().exec(ctx, `UPDATE peers SET connected = TRUE, last_seen = ?, conn_instance = ? WHERE id = ? AND account_id = ?`, seen, instance, string(id), string(a.id))
		return affected(n, err)
	}
	n, err := a.q().exec(ctx, `UPDATE peers SET connected = FALSE, last_seen = ? WHERE id = ? AND account_id = ? AND conn_instance = ?`, seen, string(id), string(a.id), instance)
	return affected(n, err)
}

// DeletePeer removes a peer.
func (a *AccountTx) DeletePeer(ctx context.Context, id account.PeerID) error {
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `DELETE FROM peers WHERE id = ? AND account_id = ?`, string(id), string(a.id))
	if err := affected(n, err); err != nil {
		return err
	}
	return a.detachRoutingPeer(ctx, id)
}

// --- setup keys ---

// SetupKeys lists the account's setup keys, oldest first.
func (a *AccountTx) SetupKeys(ctx context.Context) ([]account.SetupKey, error) {
	return queryAll(ctx, a.q(), scanSetupKey, `SELECT `+setupKeyCols+` FROM setup_keys WHERE account_id = ? ORDER BY created_at, id`, string(a.id))
}

// SetupKey finds one of the account's setup keys by ID.
func (a *AccountTx) SetupKey(ctx context.Context, id account.SetupKeyID) (account.SetupKey, error) {
	return scanSetupKey(a.q().queryRow(ctx, `SELECT `+setupKeyCols+` FROM setup_keys WHERE id = ? AND account_id = ?`, string(id), string(a.id)))
}

// InsertSetupKey stores a new setup key (its hash, never the secret).
func (a *AccountTx) InsertSetupKey(ctx context.Context, k account.SetupKey) error {
	if err := a.owns("setup key", k.AccountID); err != nil {
		return err
	}
	groups := k.AutoGroups
	if groups == nil {
		groups = []string{}
	}
	g, err := json.Marshal(groups)
	if err != nil {
		return err
	}
	_, err = a.q().exec(ctx, `INSERT INTO setup_keys (`+setupKeyCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		string(k.ID), string(k.AccountID), k.Name, k.Hash, k.Prefix, k.Reusable, k.UsageLimit, k.UsedTimes, nanos(k.ExpiresAt),
		k.Revoked, string(g), k.Ephemeral, nanos(k.CreatedAt), nanos(k.LastUsed))
	return mapErr(err)
}

// ConsumeSetupKey counts one use of the key if it is still valid at now,
// in a single conditional update so that concurrent registrations can never
// exceed the usage limit (Postgres re-checks the condition on the locked,
// newest row version). It reports whether the use was granted.
func (a *AccountTx) ConsumeSetupKey(ctx context.Context, id account.SetupKeyID, now int64) (bool, error) {
	n, err := a.q().exec(ctx, `UPDATE setup_keys SET used_times = used_times + 1, last_used = ?
		WHERE id = ? AND account_id = ? AND NOT revoked AND (expires_at = 0 OR expires_at > ?) AND (usage_limit = 0 OR used_times < usage_limit)`,
		now, string(id), string(a.id), now)
	if err != nil {
		return false, mapErr(err)
	}
	return n == 1, nil
}

// RevokeSetupKey marks a key revoked.
func (a *AccountTx) RevokeSetupKey(ctx context.Context, id account.SetupKeyID) error {
	n, err := a.q().exec(ctx, `UPDATE setup_keys SET revoked = TRUE WHERE id = ? AND account_id = ?`, string(id), string(a.id))
	return affected(n, err)
}

// --- activity log ---

// InsertEvent appends to the account's activity log and returns its
// sequence number. It takes the account lock: sequence numbers are dense.
func (a *AccountTx) InsertEvent(ctx context.Context, e account.Event) (int64, error) {
	if e.AccountID == "" {
		e.AccountID = a.id
	}
	if err := a.owns("event", e.AccountID); err != nil {
		return 0, err
	}
	if _, err := a.Lock(ctx); err != nil {
		return 0, err
	}
	meta, err := json.Marshal(e.Meta)
	if err != nil {
		return 0, err
	}
	var seq int64
	err = a.q().queryRow(ctx, `INSERT INTO events (account_id, seq, at, activity, initiator, target, meta)
		SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, ? FROM events WHERE account_id = ? RETURNING seq`,
		string(a.id), nanos(e.At), e.Activity, e.Initiator, e.Target, string(meta), string(a.id)).Scan(&seq)
	return seq, mapErr(err)
}

// Events lists the newest limit events (0: all), newest first.
func (a *AccountTx) Events(ctx context.Context, limit int) ([]account.Event, error) {
	if limit <= 0 {
		limit = 1 << 30
	}
	return queryAll(ctx, a.q(), scanEvent, `SELECT account_id, seq, at, activity, initiator, target, meta FROM events WHERE account_id = ? ORDER BY seq DESC LIMIT ?`, string(a.id), limit)
}

func scanEvent(sc scanner) (account.Event, error) {
	var (
		e         account.Event
		acc, meta string
		at        int64
	)
	if err := sc.Scan(&acc, &e.ID, &at, &e.Activity, &e.Initiator, &e.Target, &meta); err != nil {
		return e, mapErr(err)
	}
	if err := json.Unmarshal([]byte(meta), &e.Meta); err != nil {
		return e, fmt.Errorf("event %d: bad meta: %w", e.ID, err)
	}
	e.AccountID, e.At = account.ID(acc), fromNanos(at)
	return e, nil
}

func affected(n int64, err error) error {
	if err != nil {
		return mapErr(err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// IPTaken reports whether a peer of the account has the address (an
// indexed lookup, for allocation in large accounts).
func (a *AccountTx) IPTaken(ctx context.Context, ip netip.Addr) (bool, error) {
	return a.exists(ctx, `SELECT COUNT(*) FROM peers WHERE account_id = ? AND ip = ?`, string(a.id), ip.String())
}

// LabelTaken reports whether a peer other than except has the DNS label.
func (a *AccountTx) LabelTaken(ctx context.Context, label string, except account.PeerID) (bool, error) {
	return a.exists(ctx, `SELECT COUNT(*) FROM peers WHERE account_id = ? AND dns_label = ? AND id <> ?`, string(a.id), label, string(except))
}

// UsedIPs lists every address in use (the slow path of allocation in an
// almost full network).
func (a *AccountTx) UsedIPs(ctx context.Context) (map[netip.Addr]bool, error) {
	ips, err := queryAll(ctx, a.q(), func(sc scanner) (netip.Addr, error) {
		var s string
		if err := sc.Scan(&s); err != nil {
			return netip.Addr{}, mapErr(err)
		}
		return netip.ParseAddr(s)
	}, `SELECT ip FROM peers WHERE account_id = ?`, string(a.id))
	out := make(map[netip.Addr]bool, len(ips))
	for _, ip := range ips {
		out[ip] = true
	}
	return out, err
}

func (a *AccountTx) exists(ctx context.Context, q string, args ...any) (bool, error) {
	var n int
	if err := a.q().queryRow(ctx, q, args...).Scan(&n); err != nil {
		return false, mapErr(err)
	}
	return n > 0, nil
}

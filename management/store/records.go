package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
)

type scanner interface{ Scan(...any) error }

// queryAll runs a query and scans every row with scan.
func queryAll[T any](ctx context.Context, q querier, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// --- accounts ---

// InsertAccount creates an account.
func (tx *Tx) InsertAccount(ctx context.Context, a account.Account) error {
	_, err := tx.q.ExecContext(ctx, `INSERT INTO accounts (id, domain, network, serial, created_at) VALUES (?, ?, ?, ?, ?)`,
		string(a.ID), a.Domain, a.Network.String(), int64(a.Serial), nanos(a.CreatedAt))
	return mapErr(err)
}

const accountCols = `id, domain, network, serial, created_at`

func scanAccount(sc scanner) (account.Account, error) {
	var (
		a       account.Account
		id, net string
		serial  int64
		created int64
	)
	if err := sc.Scan(&id, &a.Domain, &net, &serial, &created); err != nil {
		return account.Account{}, mapErr(err)
	}
	p, err := netip.ParsePrefix(net)
	if err != nil {
		return account.Account{}, fmt.Errorf("account %s: bad network %q: %w", id, net, err)
	}
	a.ID, a.Network, a.Serial, a.CreatedAt = account.ID(id), p, uint64(serial), fromNanos(created)
	return a, nil
}

// Account returns one account.
func (tx *Tx) Account(ctx context.Context, id account.ID) (account.Account, error) {
	return scanAccount(tx.q.QueryRowContext(ctx, `SELECT `+accountCols+` FROM accounts WHERE id = ?`, string(id)))
}

// Accounts lists all accounts, oldest first.
func (tx *Tx) Accounts(ctx context.Context) ([]account.Account, error) {
	return queryAll(ctx, tx.q, scanAccount, `SELECT `+accountCols+` FROM accounts ORDER BY created_at, id`)
}

// BumpSerial increments and returns the account's network serial. Because it
// is persisted, serials stay monotonic across restarts.
func (tx *Tx) BumpSerial(ctx context.Context, id account.ID) (uint64, error) {
	var s int64
	err := tx.q.QueryRowContext(ctx, `UPDATE accounts SET serial = serial + 1 WHERE id = ? RETURNING serial`, string(id)).Scan(&s)
	return uint64(s), mapErr(err)
}

// --- peers ---

const peerCols = `id, account_id, wg_pub_key, ip, name, dns_label, meta, ssh_pub_key, setup_key_id, ephemeral, created_at, last_login, last_seen, connected`

func scanPeer(sc scanner) (account.Peer, error) {
	var (
		p                        account.Peer
		id, acc, k, ip, meta, sk string
		created, login, seen     int64
	)
	if err := sc.Scan(&id, &acc, &k, &ip, &p.Name, &p.DNSLabel, &meta, &p.SSHPubKey, &sk, &p.Ephemeral, &created, &login, &seen, &p.Connected); err != nil {
		return account.Peer{}, mapErr(err)
	}
	var err error
	if p.Key, err = key.ParsePublic(k); err != nil {
		return account.Peer{}, fmt.Errorf("peer %s: %w", id, err)
	}
	if p.IP, err = netip.ParseAddr(ip); err != nil {
		return account.Peer{}, fmt.Errorf("peer %s: bad ip: %w", id, err)
	}
	if err := json.Unmarshal([]byte(meta), &p.Meta); err != nil {
		return account.Peer{}, fmt.Errorf("peer %s: bad meta: %w", id, err)
	}
	p.ID, p.AccountID, p.SetupKeyID = account.PeerID(id), account.ID(acc), account.SetupKeyID(sk)
	p.CreatedAt, p.LastLogin, p.LastSeen = fromNanos(created), fromNanos(login), fromNanos(seen)
	return p, nil
}

// InsertPeer adds a peer. A duplicate key, IP or DNS label gives ErrConflict.
func (tx *Tx) InsertPeer(ctx context.Context, p account.Peer) error {
	meta, err := json.Marshal(p.Meta)
	if err != nil {
		return err
	}
	_, err = tx.q.ExecContext(ctx, `INSERT INTO peers (`+peerCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		string(p.ID), string(p.AccountID), p.Key.String(), p.IP.String(), p.Name, p.DNSLabel, string(meta), p.SSHPubKey,
		string(p.SetupKeyID), p.Ephemeral, nanos(p.CreatedAt), nanos(p.LastLogin), nanos(p.LastSeen), p.Connected)
	return mapErr(err)
}

// UpdatePeer rewrites a peer's mutable fields.
func (tx *Tx) UpdatePeer(ctx context.Context, p account.Peer) error {
	meta, err := json.Marshal(p.Meta)
	if err != nil {
		return err
	}
	res, err := tx.q.ExecContext(ctx, `UPDATE peers SET wg_pub_key = ?, ip = ?, name = ?, dns_label = ?, meta = ?, ssh_pub_key = ?, last_login = ?, last_seen = ?, connected = ? WHERE id = ?`,
		p.Key.String(), p.IP.String(), p.Name, p.DNSLabel, string(meta), p.SSHPubKey, nanos(p.LastLogin), nanos(p.LastSeen), p.Connected, string(p.ID))
	if err != nil {
		return mapErr(err)
	}
	return affected(res)
}

// SetPeerConnected records whether a peer has a Sync stream open.
func (tx *Tx) SetPeerConnected(ctx context.Context, id account.PeerID, connected bool, seen int64) error {
	res, err := tx.q.ExecContext(ctx, `UPDATE peers SET connected = ?, last_seen = ? WHERE id = ?`, connected, seen, string(id))
	if err != nil {
		return mapErr(err)
	}
	return affected(res)
}

// DeletePeer removes a peer.
func (tx *Tx) DeletePeer(ctx context.Context, id account.PeerID) error {
	res, err := tx.q.ExecContext(ctx, `DELETE FROM peers WHERE id = ?`, string(id))
	if err != nil {
		return mapErr(err)
	}
	return affected(res)
}

// PeerByKey finds a peer by its WireGuard public key.
func (tx *Tx) PeerByKey(ctx context.Context, k key.Public) (account.Peer, error) {
	return scanPeer(tx.q.QueryRowContext(ctx, `SELECT `+peerCols+` FROM peers WHERE wg_pub_key = ?`, k.String()))
}

// Peer finds a peer by ID.
func (tx *Tx) Peer(ctx context.Context, id account.PeerID) (account.Peer, error) {
	return scanPeer(tx.q.QueryRowContext(ctx, `SELECT `+peerCols+` FROM peers WHERE id = ?`, string(id)))
}

// Peers lists the account's peers ordered by IP registration time.
func (tx *Tx) Peers(ctx context.Context, id account.ID) ([]account.Peer, error) {
	return queryAll(ctx, tx.q, scanPeer, `SELECT `+peerCols+` FROM peers WHERE account_id = ? ORDER BY created_at, id`, string(id))
}

// StaleEphemeralPeers lists ephemeral peers offline since before the given
// time (unix nanoseconds).
func (tx *Tx) StaleEphemeralPeers(ctx context.Context, before int64) ([]account.Peer, error) {
	return queryAll(ctx, tx.q, scanPeer, `SELECT `+peerCols+` FROM peers WHERE ephemeral AND NOT connected AND last_seen < ?`, before)
}

// MarkAllDisconnected records that no peer has a stream open, as after a
// restart of the only management instance; it counts offline time from now.
func (tx *Tx) MarkAllDisconnected(ctx context.Context, now int64) error {
	_, err := tx.q.ExecContext(ctx, `UPDATE peers SET connected = FALSE, last_seen = ? WHERE connected`, now)
	return err
}

// --- setup keys ---

const setupKeyCols = `id, account_id, name, key_hash, key_prefix, reusable, usage_limit, used_times, expires_at, revoked, auto_groups, ephemeral, created_at, last_used`

func scanSetupKey(sc scanner) (account.SetupKey, error) {
	var (
		k                     account.SetupKey
		id, acc, groups       string
		expires, created, use int64
	)
	if err := sc.Scan(&id, &acc, &k.Name, &k.Hash, &k.Prefix, &k.Reusable, &k.UsageLimit, &k.UsedTimes, &expires, &k.Revoked, &groups, &k.Ephemeral, &created, &use); err != nil {
		return account.SetupKey{}, mapErr(err)
	}
	if err := json.Unmarshal([]byte(groups), &k.AutoGroups); err != nil {
		return account.SetupKey{}, fmt.Errorf("setup key %s: bad auto groups: %w", id, err)
	}
	k.ID, k.AccountID = account.SetupKeyID(id), account.ID(acc)
	k.ExpiresAt, k.CreatedAt, k.LastUsed = fromNanos(expires), fromNanos(created), fromNanos(use)
	return k, nil
}

// InsertSetupKey stores a new setup key (its hash, never the secret).
func (tx *Tx) InsertSetupKey(ctx context.Context, k account.SetupKey) error {
	groups := k.AutoGroups
	if groups == nil {
		groups = []string{}
	}
	g, err := json.Marshal(groups)
	if err != nil {
		return err
	}
	_, err = tx.q.ExecContext(ctx, `INSERT INTO setup_keys (`+setupKeyCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		string(k.ID), string(k.AccountID), k.Name, k.Hash, k.Prefix, k.Reusable, k.UsageLimit, k.UsedTimes, nanos(k.ExpiresAt),
		k.Revoked, string(g), k.Ephemeral, nanos(k.CreatedAt), nanos(k.LastUsed))
	return mapErr(err)
}

// SetupKeyByHash finds a setup key by the hash of its secret.
func (tx *Tx) SetupKeyByHash(ctx context.Context, hash string) (account.SetupKey, error) {
	return scanSetupKey(tx.q.QueryRowContext(ctx, `SELECT `+setupKeyCols+` FROM setup_keys WHERE key_hash = ?`, hash))
}

// SetupKey finds a setup key by ID.
func (tx *Tx) SetupKey(ctx context.Context, id account.SetupKeyID) (account.SetupKey, error) {
	return scanSetupKey(tx.q.QueryRowContext(ctx, `SELECT `+setupKeyCols+` FROM setup_keys WHERE id = ?`, string(id)))
}

// SetupKeys lists an account's setup keys, oldest first.
func (tx *Tx) SetupKeys(ctx context.Context, id account.ID) ([]account.SetupKey, error) {
	return queryAll(ctx, tx.q, scanSetupKey, `SELECT `+setupKeyCols+` FROM setup_keys WHERE account_id = ? ORDER BY created_at, id`, string(id))
}

// ConsumeSetupKey counts one use of the key if it is still valid at now,
// in a single conditional update so that concurrent registrations can never
// exceed the usage limit. It reports whether the use was granted.
func (tx *Tx) ConsumeSetupKey(ctx context.Context, id account.SetupKeyID, now int64) (bool, error) {
	res, err := tx.q.ExecContext(ctx, `UPDATE setup_keys SET used_times = used_times + 1, last_used = ?
		WHERE id = ? AND NOT revoked AND (expires_at = 0 OR expires_at > ?) AND (usage_limit = 0 OR used_times < usage_limit)`,
		now, string(id), now)
	if err != nil {
		return false, mapErr(err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// RevokeSetupKey marks a key revoked.
func (tx *Tx) RevokeSetupKey(ctx context.Context, id account.SetupKeyID) error {
	res, err := tx.q.ExecContext(ctx, `UPDATE setup_keys SET revoked = TRUE WHERE id = ?`, string(id))
	if err != nil {
		return mapErr(err)
	}
	return affected(res)
}

// --- settings ---

// Setting reads a named value.
func (tx *Tx) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := tx.q.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = ?`, name).Scan(&v)
	return v, mapErr(err)
}

// InsertSetting stores a named value; an existing name gives ErrConflict.
func (tx *Tx) InsertSetting(ctx context.Context, name, value string) error {
	_, err := tx.q.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, ?)`, name, value)
	return mapErr(err)
}

func affected(res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

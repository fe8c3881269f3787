package store

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
)

// This file holds the queries that are not bound to one account: accounts
// themselves, server settings, the authentication lookups (whose result
// names the owning account) and maintenance sweeps across accounts.

// InsertAccount creates an account.
func (tx *Tx) InsertAccount(ctx context.Context, a account.Account) error {
	settings, err := json.Marshal(a.Settings)
	if err != nil {
		return err
	}
	_, err = tx.q.exec(ctx, `INSERT INTO accounts (id, domain, network, serial, created_at, settings, network_v6) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		string(a.ID), a.Domain, a.Network.String(), int64(a.Serial), nanos(a.CreatedAt), string(settings), prefixText(a.NetworkV6))
	return mapErr(err)
}

// addrText stores an unset (zero) address as ” (prefixText: routes.go).
func addrText(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

const accountCols = `id, domain, network, serial, created_at, settings, network_v6`

func scanAccount(sc scanner) (account.Account, error) {
	var (
		a        account.Account
		id, net  string
		serial   int64
		created  int64
		settings string
		net6     string
	)
	if err := sc.Scan(&id, &a.Domain, &net, &serial, &created, &settings, &net6); err != nil {
		return account.Account{}, mapErr(err)
	}
	if net6 != "" {
		p6, err := netip.ParsePrefix(net6)
		if err != nil {
			return account.Account{}, fmt.Errorf("account %s: bad network_v6 %q: %w", id, net6, err)
		}
		a.NetworkV6 = p6.Masked()
	}
	if err := json.Unmarshal([]byte(settings), &a.Settings); err != nil {
		return account.Account{}, fmt.Errorf("account %s: bad settings: %w", id, err)
	}
	p, err := netip.ParsePrefix(net)
	if err != nil {
		return account.Account{}, fmt.Errorf("account %s: bad network %q: %w", id, net, err)
	}
	a.ID, a.Network, a.Serial, a.CreatedAt = account.ID(id), p, uint64(serial), fromNanos(created)
	return a, nil
}

// Accounts lists all accounts, oldest first.
func (tx *Tx) Accounts(ctx context.Context) ([]account.Account, error) {
	return queryAll(ctx, tx.q, scanAccount, `SELECT `+accountCols+` FROM accounts ORDER BY created_at, id`)
}

// Serials maps every account to its network serial (the change watcher's
// cheap poll).
func (tx *Tx) Serials(ctx context.Context) (map[account.ID]uint64, error) {
	type row struct {
		id     string
		serial int64
	}
	rs, err := queryAll(ctx, tx.q, func(sc scanner) (row, error) {
		var r row
		return r, mapErr(sc.Scan(&r.id, &r.serial))
	}, `SELECT id, serial FROM accounts`)
	if err != nil {
		return nil, err
	}
	out := make(map[account.ID]uint64, len(rs))
	for _, r := range rs {
		out[account.ID(r.id)] = uint64(r.serial)
	}
	return out, nil
}

// PeerByKey finds a peer by its WireGuard public key, in whatever account
// it belongs to: this is how a peer authenticates.
func (tx *Tx) PeerByKey(ctx context.Context, k key.Public) (account.Peer, error) {
	return scanPeer(tx.q.queryRow(ctx, `SELECT `+peerCols+` FROM peers WHERE wg_pub_key = ?`, k.String()))
}

// SetupKeyByHash finds a setup key by the hash of its secret, in whatever
// account it belongs to: this is how a new peer authenticates.
func (tx *Tx) SetupKeyByHash(ctx context.Context, hash string) (account.SetupKey, error) {
	return scanSetupKey(tx.q.queryRow(ctx, `SELECT `+setupKeyCols+` FROM setup_keys WHERE key_hash = ?`, hash))
}

// StaleEphemeralPeers lists ephemeral peers of every account offline since
// before the given time (unix nanoseconds).
func (tx *Tx) StaleEphemeralPeers(ctx context.Context, before int64) ([]account.Peer, error) {
	return queryAll(ctx, tx.q, scanPeer, `SELECT `+peerCols+` FROM peers WHERE ephemeral AND NOT connected AND last_seen < ?`, before)
}

// StaleTemporaryPeers lists temporary peers of every account offline (or
// never connected) since before the given time (unix nanoseconds).
func (tx *Tx) StaleTemporaryPeers(ctx context.Context, before int64) ([]account.Peer, error) {
	return queryAll(ctx, tx.q, scanPeer, `SELECT `+peerCols+` FROM peers WHERE temporary AND NOT connected AND last_seen < ?`, before)
}

// MarkAllDisconnected records that no peer has a stream open, as after a
// restart of the only management instance; it counts offline time from now.
func (tx *Tx) MarkAllDisconnected(ctx context.Context, now int64) error {
	_, err := tx.q.exec(ctx, `UPDATE peers SET connected = FALSE, last_seen = ? WHERE connected`, now)
	return mapErr(err)
}

// Heartbeat records that a management instance is alive. registered is
// true when the instance had no row: at its first beat, or after the others
// took it for dead (its peers were then recorded offline).
func (tx *Tx) Heartbeat(ctx context.Context, instance string, now int64) (registered bool, err error) {
	n, err := tx.q.exec(ctx, `UPDATE instances SET heartbeat = ? WHERE id = ?`, now, instance)
	if err != nil {
		return false, mapErr(err)
	}
	if n > 0 {
		return false, nil
	}
	_, err = tx.q.exec(ctx, `INSERT INTO instances (id, started_at, heartbeat) VALUES (?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET heartbeat = excluded.heartbeat`, instance, now, now)
	return true, mapErr(err)
}

// RemoveInstance records a clean stop of an instance: its peers are
// offline from now.
func (tx *Tx) RemoveInstance(ctx context.Context, instance string, now int64) error {
	if _, err := tx.q.exec(ctx, `UPDATE peers SET connected = FALSE, last_seen = ? WHERE connected AND conn_instance = ?`, now, instance); err != nil {
		return mapErr(err)
	}
	_, err := tx.q.exec(ctx, `DELETE FROM instances WHERE id = ?`, instance)
	return mapErr(err)
}

// ReapInstances forgets instances whose last heartbeat is before deadline
// and marks offline every peer whose stream was on an instance not alive
// (one that died, or one from before instances were recorded). It returns
// how many peers it marked.
func (tx *Tx) ReapInstances(ctx context.Context, deadline, now int64) (int64, error) {
	if _, err := tx.q.exec(ctx, `DELETE FROM instances WHERE heartbeat < ?`, deadline); err != nil {
		return 0, mapErr(err)
	}
	n, err := tx.q.exec(ctx, `UPDATE peers SET connected = FALSE, last_seen = ? WHERE connected AND conn_instance NOT IN (SELECT id FROM instances)`, now)
	return n, mapErr(err)
}

// Setting reads a named server-wide value.
func (tx *Tx) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := tx.q.queryRow(ctx, `SELECT value FROM settings WHERE name = ?`, name).Scan(&v)
	return v, mapErr(err)
}

// InsertSetting stores a named value; an existing name gives ErrConflict.
func (tx *Tx) InsertSetting(ctx context.Context, name, value string) error {
	_, err := tx.q.exec(ctx, `INSERT INTO settings (name, value) VALUES (?, ?)`, name, value)
	return mapErr(err)
}

// --- row codecs shared with the account-scoped queries ---

const peerCols = `id, account_id, wg_pub_key, ip, name, dns_label, meta, ssh_pub_key, setup_key_id, ephemeral, created_at, last_login, last_seen, connected, user_id, login_expiration_enabled, approval_required, temporary, ssh_enabled, ipv6`

// peerValues are the values of peerCols for an INSERT.
const peerValues = `?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?`

func peerArgs(p account.Peer) ([]any, error) {
	meta, err := json.Marshal(p.Meta)
	if err != nil {
		return nil, err
	}
	return []any{string(p.ID), string(p.AccountID), p.Key.String(), p.IP.String(), p.Name, p.DNSLabel, string(meta), p.SSHPubKey,
		string(p.SetupKeyID), p.Ephemeral, nanos(p.CreatedAt), nanos(p.LastLogin), nanos(p.LastSeen), p.Connected,
		string(p.UserID), p.LoginExpirationEnabled, p.ApprovalRequired, p.Temporary, p.SSHEnabled, addrText(p.IPv6)}, nil
}

func scanPeer(sc scanner) (account.Peer, error) {
	var (
		p                              account.Peer
		id, acc, k, ip, meta, sk, user string
		ip6                            string
		created, login, seen           int64
	)
	if err := sc.Scan(&id, &acc, &k, &ip, &p.Name, &p.DNSLabel, &meta, &p.SSHPubKey, &sk, &p.Ephemeral, &created, &login, &seen, &p.Connected, &user, &p.LoginExpirationEnabled, &p.ApprovalRequired, &p.Temporary, &p.SSHEnabled, &ip6); err != nil {
		return account.Peer{}, mapErr(err)
	}
	var err error
	if ip6 != "" {
		if p.IPv6, err = netip.ParseAddr(ip6); err != nil {
			return account.Peer{}, fmt.Errorf("peer %s: bad ipv6: %w", id, err)
		}
	}
	if p.Key, err = key.ParsePublic(k); err != nil {
		return account.Peer{}, fmt.Errorf("peer %s: %w", id, err)
	}
	if p.IP, err = netip.ParseAddr(ip); err != nil {
		return account.Peer{}, fmt.Errorf("peer %s: bad ip: %w", id, err)
	}
	if err := json.Unmarshal([]byte(meta), &p.Meta); err != nil {
		return account.Peer{}, fmt.Errorf("peer %s: bad meta: %w", id, err)
	}
	p.ID, p.AccountID, p.SetupKeyID, p.UserID = account.PeerID(id), account.ID(acc), account.SetupKeyID(sk), account.UserID(user)
	p.CreatedAt, p.LastLogin, p.LastSeen = fromNanos(created), fromNanos(login), fromNanos(seen)
	return p, nil
}

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

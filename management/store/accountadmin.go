package store

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/wiremesh/wiremesh/management/account"
)

// This file holds the account-wide administration writes: the DNS domain,
// the overlay network with the re-addressing of every peer, and deleting
// an account with everything in it.

// SetDomain replaces the account's peer DNS domain.
func (a *AccountTx) SetDomain(ctx context.Context, domain string) error {
	n, err := a.q().exec(ctx, `UPDATE accounts SET domain = ? WHERE id = ?`, domain, string(a.id))
	return affected(n, err)
}

// Readdress moves the account to network and gives its peers the
// addresses in ips (every peer of the account must have one, all distinct
// and inside network). Peers are first parked on placeholder values, so an
// address that moves from one peer to another never collides on the
// (account, ip) index half-way.
func (a *AccountTx) Readdress(ctx context.Context, network netip.Prefix, ips map[account.PeerID]netip.Addr) error {
	ps, err := a.Peers(ctx)
	if err != nil {
		return err
	}
	seen := make(map[netip.Addr]bool, len(ips))
	for _, p := range ps {
		ip, ok := ips[p.ID]
		if !ok || !network.Contains(ip) || seen[ip] {
			return fmt.Errorf("readdress: peer %s has no distinct address in %s", p.ID, network)
		}
		seen[ip] = true
	}
	if len(ips) != len(ps) {
		return fmt.Errorf("readdress: %d addresses for %d peers", len(ips), len(ps))
	}
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	if _, err := a.q().exec(ctx, `UPDATE peers SET ip = 'readdress:' || id WHERE account_id = ?`, string(a.id)); err != nil {
		return mapErr(err)
	}
	for id, ip := range ips {
		n, err := a.q().exec(ctx, `UPDATE peers SET ip = ? WHERE id = ? AND account_id = ?`, ip.String(), string(id), string(a.id))
		if err := affected(n, err); err != nil {
			return fmt.Errorf("readdress peer %s: %w", id, err)
		}
	}
	n, err := a.q().exec(ctx, `UPDATE accounts SET network = ? WHERE id = ?`, network.String(), string(a.id))
	return affected(n, err)
}

// DeleteAccount removes an account and every row that names it, in every
// table with an account_id column (found in the schema, so tables added
// later are covered too). Rows keyed by user rather than account (local
// logins, revocations) are the caller's to handle first.
func (tx *Tx) DeleteAccount(ctx context.Context, id account.ID) error {
	tables, err := tx.accountTables(ctx)
	if err != nil {
		return err
	}
	n, err := tx.q.exec(ctx, `DELETE FROM accounts WHERE id = ?`, string(id))
	if err := affected(n, err); err != nil {
		return err
	}
	// Foreign keys cascade from accounts; this catches tables without one.
	for _, t := range tables {
		if _, err := tx.q.exec(ctx, `DELETE FROM "`+t+`" WHERE account_id = ?`, string(id)); err != nil {
			return fmt.Errorf("delete account %s from %s: %w", id, t, mapErr(err))
		}
	}
	return nil
}

// AccountRows counts, per table with an account_id column, the rows that
// name the account (those with none are left out): what DeleteAccount
// leaves behind, for tests and checks.
func (tx *Tx) AccountRows(ctx context.Context, id account.ID) (map[string]int, error) {
	tables, err := tx.accountTables(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	var n int
	if err := tx.q.queryRow(ctx, `SELECT COUNT(*) FROM accounts WHERE id = ?`, string(id)).Scan(&n); err != nil {
		return nil, mapErr(err)
	}
	if n > 0 {
		out["accounts"] = n
	}
	for _, t := range tables {
		if err := tx.q.queryRow(ctx, `SELECT COUNT(*) FROM "`+t+`" WHERE account_id = ?`, string(id)).Scan(&n); err != nil {
			return nil, fmt.Errorf("count %s: %w", t, mapErr(err))
		}
		if n > 0 {
			out[t] = n
		}
	}
	return out, nil
}

// accountTables lists the tables, other than accounts, with an account_id
// column.
func (tx *Tx) accountTables(ctx context.Context) ([]string, error) {
	q := `SELECT m.name FROM sqlite_master m JOIN pragma_table_info(m.name) c WHERE m.type = 'table' AND c.name = 'account_id' ORDER BY m.name`
	if tx.eng.name() == Postgres {
		q = `SELECT table_name FROM information_schema.columns WHERE column_name = 'account_id' AND table_schema = current_schema() ORDER BY table_name`
	}
	ts, err := queryAll(ctx, tx.q, func(sc scanner) (string, error) {
		var t string
		return t, mapErr(sc.Scan(&t))
	}, q)
	if err != nil {
		return nil, fmt.Errorf("list account tables: %w", err)
	}
	out := ts[:0]
	for _, t := range ts {
		if t != "accounts" && !strings.ContainsAny(t, `"`) {
			out = append(out, t)
		}
	}
	return out, nil
}

// InactiveBetween lists, across accounts, the disconnected peers added by
// users whose login can expire and whose last contact (the later of their
// last sighting and last login) lies in (after, before] (unix
// nanoseconds): the inactivity sweeper's candidates.
func (tx *Tx) InactiveBetween(ctx context.Context, after, before int64) ([]account.Peer, error) {
	return queryAll(ctx, tx.q, scanPeer, `SELECT `+peerCols+` FROM peers WHERE user_id <> '' AND login_expiration_enabled AND NOT connected AND (
		(last_seen >= last_login AND last_seen > ? AND last_seen <= ?) OR (last_login > last_seen AND last_login > ? AND last_login <= ?))`,
		after, before, after, before)
}

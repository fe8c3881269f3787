package store

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/wiremesh/wiremesh/management/account"
)

// This file holds the IPv6 overlay's writes: the account's v6 network and
// the peers' v6 addresses ('' in peers.ipv6 for none; the others unique
// per account by the partial index peers_ipv6).

// SetPeerIPv6 gives the peer the v6 address ip, or takes its address away
// (the zero Addr). An address another peer of the account holds gives
// ErrConflict.
func (a *AccountTx) SetPeerIPv6(ctx context.Context, id account.PeerID, ip netip.Addr) error {
	if ip.IsValid() && (!ip.Is6() || ip.Is4In6()) {
		return fmt.Errorf("peer %s: %s is not an IPv6 address", id, ip)
	}
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `UPDATE peers SET ipv6 = ? WHERE id = ? AND account_id = ?`, addrText(ip), string(id), string(a.id))
	return affected(n, err)
}

// IPv6Taken reports whether a peer of the account has the v6 address (an
// indexed lookup, for allocation).
func (a *AccountTx) IPv6Taken(ctx context.Context, ip netip.Addr) (bool, error) {
	return a.exists(ctx, `SELECT COUNT(*) FROM peers WHERE account_id = ? AND ipv6 = ?`, string(a.id), ip.String())
}

// UsedIPv6s lists every v6 address in use (the slow path of allocation in
// a small, nearly full custom range).
func (a *AccountTx) UsedIPv6s(ctx context.Context) (map[netip.Addr]bool, error) {
	ips, err := queryAll(ctx, a.q(), func(sc scanner) (netip.Addr, error) {
		var s string
		if err := sc.Scan(&s); err != nil {
			return netip.Addr{}, mapErr(err)
		}
		return netip.ParseAddr(s)
	}, `SELECT ipv6 FROM peers WHERE account_id = ? AND ipv6 <> ''`, string(a.id))
	out := make(map[netip.Addr]bool, len(ips))
	for _, ip := range ips {
		out[ip] = true
	}
	return out, err
}

// ReaddressV6 moves the account to the v6 network and gives peers the v6
// addresses in ips (all distinct and inside network; a zero Addr takes a
// peer's address away); peers not in ips must have no v6 address left
// outside network. Peers are first parked on placeholders, so an address
// that moves between peers never collides on the index half-way.
func (a *AccountTx) ReaddressV6(ctx context.Context, network netip.Prefix, ips map[account.PeerID]netip.Addr) error {
	network = network.Masked()
	if !network.Addr().Is6() {
		return fmt.Errorf("readdress v6: %s is not an IPv6 network", network)
	}
	seen := make(map[netip.Addr]bool, len(ips))
	for id, ip := range ips {
		if !ip.IsValid() {
			continue
		}
		if !network.Contains(ip) || seen[ip] {
			return fmt.Errorf("readdress v6: peer %s has no distinct address in %s", id, network)
		}
		seen[ip] = true
	}
	ps, err := a.Peers(ctx)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if _, ok := ips[p.ID]; !ok && p.IPv6.IsValid() && !network.Contains(p.IPv6) {
			return fmt.Errorf("readdress v6: peer %s keeps %s outside %s", p.ID, p.IPv6, network)
		}
	}
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	for id := range ips {
		if _, err := a.q().exec(ctx, `UPDATE peers SET ipv6 = 'readdress:' || id WHERE id = ? AND account_id = ?`, string(id), string(a.id)); err != nil {
			return mapErr(err)
		}
	}
	for id, ip := range ips {
		n, err := a.q().exec(ctx, `UPDATE peers SET ipv6 = ? WHERE id = ? AND account_id = ?`, addrText(ip), string(id), string(a.id))
		if err := affected(n, err); err != nil {
			return fmt.Errorf("readdress v6 peer %s: %w", id, err)
		}
	}
	n, err := a.q().exec(ctx, `UPDATE accounts SET network_v6 = ? WHERE id = ?`, network.String(), string(a.id))
	return affected(n, err)
}

// Package v6addr gives peers their IPv6 overlay addresses, inside the
// caller's store transaction, by the rule below. It does not choose
// addresses (package ipam does), validate settings (package account) or
// tell anyone about the change (the calling domain service bumps the
// serial and notifies).
package v6addr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/ipam"
	"github.com/wiremesh/wiremesh/management/store"
)

// The rule, after NetBird's:
// a peer in a group of Settings.IPv6EnabledGroups gets a random address
// in the account's NetworkV6 once its agent supports the overlay
// (Peer.SupportsIPv6); it keeps the address while it stays in such a group,
// also when its agent stops reporting the capability (the map then leaves
// the address out, and the peer gets the same one back when it reports it
// again); it loses the address when it leaves every enabled group or the
// account names none. A change of NetworkV6 moves the addresses, keeping
// their interface IDs where they fit.

// ErrNetworkTooSmall is a network_range_v6 that cannot hold the
// account's IPv6 peers.
var ErrNetworkTooSmall = errors.New("network_range_v6 is too small")

// ipv6Groups reports, for each peer ID, whether the peer is in a group of
// the account's IPv6EnabledGroups.
type ipv6Groups struct {
	all     bool // the All group is enabled: every non-temporary peer
	members map[account.PeerID]bool
}

func readIPv6Groups(ctx context.Context, at *store.AccountTx, s account.Settings) (ipv6Groups, error) {
	out := ipv6Groups{members: map[account.PeerID]bool{}}
	if len(s.IPv6EnabledGroups) == 0 {
		return out, nil
	}
	gs, err := at.Groups(ctx)
	if err != nil {
		return out, err
	}
	for _, g := range gs {
		if !slices.Contains(s.IPv6EnabledGroups, g.ID) {
			continue
		}
		if g.All {
			out.all = true
		}
		for _, id := range g.Peers {
			out.members[id] = true
		}
	}
	return out, nil
}

// has: temporary peers (the browser client) belong to no group, not even All.
func (g ipv6Groups) has(p account.Peer) bool {
	return g.members[p.ID] || (g.all && !p.Temporary)
}

// wantIPv6 is the address p should have: its own when it has one in
// network and may keep it, a new one (invalid Addr, true) when it needs
// one, none (invalid, false) otherwise.
func wantIPv6(p account.Peer, network netip.Prefix, enabled bool) (keep netip.Addr, allocate bool) {
	if !enabled || !network.IsValid() {
		return netip.Addr{}, false
	}
	if p.IPv6.IsValid() && network.Contains(p.IPv6) {
		return p.IPv6, false
	}
	return netip.Addr{}, p.SupportsIPv6()
}

// pickIPv6 returns a free v6 address of network: random picks with
// indexed lookups, a scan only in a small, nearly full custom range.
func pickIPv6(ctx context.Context, at *store.AccountTx, network netip.Prefix) (netip.Addr, error) {
	ip, err := ipam.PickV6(network, func(ip netip.Addr) (bool, error) { return at.IPv6Taken(ctx, ip) })
	if errors.Is(err, ipam.ErrCrowded) {
		var used map[netip.Addr]bool
		if used, err = at.UsedIPv6s(ctx); err == nil {
			ip, err = ipam.NextV6(network, used)
		}
	}
	if errors.Is(err, ipam.ErrFull) {
		return ip, fmt.Errorf("%w: %w", ErrNetworkTooSmall, err)
	}
	return ip, err
}

// Assign gives one peer the v6 address the rule calls for when it has
// none (at registration and login; p.Meta is what the agent reports
// now); it reports whether the address changed. It returns the account
// it decided by: acc, or acc re-read under the account lock when it took
// it (callers use that state from then on, so that Login's address_v6
// follows the same settings).
//
// A metadata report that changes nothing (every Sync start) costs no
// lock and no write: the lock is taken only when an address may have to
// be allocated.
func Assign(ctx context.Context, at *store.AccountTx, acc account.Account, p *account.Peer) (account.Account, bool, error) {
	// The common cases cost no read: a peer that has its address keeps it
	// (Reconcile takes it away when group changes require), and one
	// that cannot or may not have one gets none.
	if p.IPv6.IsValid() && acc.NetworkV6.Contains(p.IPv6) {
		return acc, false, nil
	}
	if !p.IPv6.IsValid() && (!p.SupportsIPv6() || !acc.NetworkV6.IsValid() || len(acc.Settings.IPv6EnabledGroups) == 0) {
		return acc, false, nil
	}
	if !p.IPv6.IsValid() {
		// A capable peer without an address is most often in none of the
		// enabled groups (the admin enabled only some): decide that
		// without the lock. It is safe when the stored peer already
		// reports the capability: a concurrent change that makes the peer
		// a member (a group or settings write) then reconciles under the
		// lock and sees it capable. A newly reported capability takes the
		// locked path (the caller writes and bumps the serial anyway).
		in, err := inEnabledGroup(ctx, at, acc.Settings, *p)
		if err != nil {
			return acc, false, err
		}
		if !in {
			stored, err := at.Peer(ctx, p.ID)
			if err != nil {
				return acc, false, err
			}
			if stored.SupportsIPv6() {
				return acc, false, nil
			}
		}
	}
	// Queue behind group and settings changes (they hold the account
	// row), so the groups read next are the committed ones and a
	// concurrent Reconcile's result is seen, not overwritten.
	acc, err := at.Lock(ctx)
	if err != nil {
		return acc, false, err
	}
	cur, err := at.Peer(ctx, p.ID)
	if err != nil {
		return acc, false, err
	}
	cur.Meta = p.Meta // the capability as reported now, maybe not yet stored
	gs, err := readIPv6Groups(ctx, at, acc.Settings)
	if err != nil {
		return acc, false, err
	}
	keep, allocate := wantIPv6(cur, acc.NetworkV6, gs.has(cur))
	if allocate {
		if keep, err = pickIPv6(ctx, at, acc.NetworkV6); err != nil {
			return acc, false, fmt.Errorf("peer %s: IPv6 address: %w", p.ID, err)
		}
	}
	if keep == cur.IPv6 {
		p.IPv6 = keep
		return acc, false, nil
	}
	if err := at.SetPeerIPv6(ctx, p.ID, keep); err != nil {
		return acc, false, err
	}
	p.IPv6 = keep
	return acc, true, nil
}

// inEnabledGroup reports whether p is in one of s.IPv6EnabledGroups,
// reading those groups only (an enabled group that no longer exists holds
// nobody).
func inEnabledGroup(ctx context.Context, at *store.AccountTx, s account.Settings, p account.Peer) (bool, error) {
	for _, id := range s.IPv6EnabledGroups {
		g, err := at.Group(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		if slices.Contains(g.Peers, p.ID) || g.All && !p.Temporary {
			return true, nil
		}
	}
	return false, nil
}

// Reconcile brings every peer's v6 address in line with the rule
// after the account's IPv6EnabledGroups or a group's members changed; it
// reports whether any address changed. Callers hold the account lock.
func Reconcile(ctx context.Context, at *store.AccountTx, acc account.Account) (bool, error) {
	ps, err := at.Peers(ctx)
	if err != nil {
		return false, err
	}
	gs, err := readIPv6Groups(ctx, at, acc.Settings)
	if err != nil {
		return false, err
	}
	changed := false
	// Releases first, so their addresses are free for the allocations.
	var need []account.Peer
	for _, p := range ps {
		keep, allocate := wantIPv6(p, acc.NetworkV6, gs.has(p))
		switch {
		case allocate:
			need = append(need, p)
		case keep != p.IPv6:
			if err := at.SetPeerIPv6(ctx, p.ID, keep); err != nil {
				return false, err
			}
			changed = true
		}
	}
	for _, p := range need {
		ip, err := pickIPv6(ctx, at, acc.NetworkV6)
		if err != nil {
			return false, fmt.Errorf("peer %s: IPv6 address: %w", p.ID, err)
		}
		if err := at.SetPeerIPv6(ctx, p.ID, ip); err != nil {
			return false, err
		}
		changed = true
	}
	return changed, nil
}

// Readdress moves the account's v6 peers into the network to, keeping
// interface IDs where they fit.
func Readdress(ctx context.Context, at *store.AccountTx, to netip.Prefix) error {
	ps, err := at.Peers(ctx)
	if err != nil {
		return err
	}
	var (
		ids []account.PeerID
		old []netip.Addr
	)
	for _, p := range ps {
		if p.IPv6.IsValid() {
			ids, old = append(ids, p.ID), append(old, p.IPv6)
		}
	}
	ips, err := ipam.ReaddressV6(to, old)
	if err != nil {
		return fmt.Errorf("%w: %s for %d IPv6 peers: %w", ErrNetworkTooSmall, to, len(old), err)
	}
	m := make(map[account.PeerID]netip.Addr, len(ids))
	for i, id := range ids {
		m[id] = ips[i]
	}
	return at.ReaddressV6(ctx, to, m)
}

// GroupsChanged runs Reconcile when one of the groups whose members
// changed is an IPv6-enabled one (peers joining get addresses, peers
// leaving lose them); otherwise it costs one read of the account. When a
// group changed it takes the account lock (the serial bump that follows
// would take it anyway) before reading the settings, as Reconcile needs:
// a settings change enabling the group then either committed before (its
// groups are read here) or waits and reconciles after this change; and
// two allocations in one account cannot pick the same address.
func GroupsChanged(ctx context.Context, at *store.AccountTx, ids ...account.GroupID) (bool, error) {
	if len(ids) == 0 {
		return false, nil
	}
	acc, err := at.Lock(ctx)
	if err != nil {
		return false, err
	}
	if !slices.ContainsFunc(ids, func(id account.GroupID) bool { return slices.Contains(acc.Settings.IPv6EnabledGroups, id) }) {
		return false, nil
	}
	return Reconcile(ctx, at, acc)
}

// Errors of Set, for an admin's choice of address.
var (
	// ErrNotEnabled: the peer is in no IPv6-enabled group (or the account
	// has no IPv6 network), so it cannot hold an address.
	ErrNotEnabled = errors.New("the peer is in no group of ipv6_enabled_groups")
	// ErrBadAddress: the address is outside the account's IPv6 network,
	// its subnet-router anycast address, or another peer's.
	ErrBadAddress = errors.New("unusable ipv6 address")
)

// Set gives peer p the v6 address ip an admin chose (PUT /api/peers/{id}
// ipv6), as NetBird allows: p must be in an IPv6-enabled group and ip a
// free host address of the account's IPv6 network.
func Set(ctx context.Context, at *store.AccountTx, acc account.Account, p account.Peer, ip netip.Addr) error {
	if ip == p.IPv6 {
		return nil
	}
	gs, err := readIPv6Groups(ctx, at, acc.Settings)
	if err != nil {
		return err
	}
	if !acc.NetworkV6.IsValid() || !gs.has(p) {
		return ErrNotEnabled
	}
	if !ip.Is6() || ip.Is4In6() || !ipam.UsableV6(acc.NetworkV6, ip) {
		return fmt.Errorf("%w: ipv6 %s is not a host address of the account's IPv6 network %s", ErrBadAddress, ip, acc.NetworkV6)
	}
	taken, err := at.IPv6Taken(ctx, ip)
	if err != nil {
		return err
	}
	if taken {
		return fmt.Errorf("%w: ipv6 %s is another peer's", ErrBadAddress, ip)
	}
	return at.SetPeerIPv6(ctx, p.ID, ip)
}

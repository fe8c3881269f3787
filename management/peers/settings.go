package peers

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/ipam"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/v6addr"
)

// AccountUpdate is a new state of an account's adjustable parts.
type AccountUpdate struct {
	Settings account.Settings
	// Domain is the peers' DNS domain ("": unchanged), already checked by
	// account.ParseDNSDomain.
	Domain string
	// Network is the overlay range (invalid: unchanged), already checked
	// by account.ParseNetworkRange. A new range re-addresses every peer.
	Network netip.Prefix
	// NetworkV6 is the IPv6 overlay range (invalid: unchanged), already
	// checked by account.ParseNetworkRangeV6. A new range moves every
	// IPv6 peer, keeping interface IDs where they fit.
	NetworkV6 netip.Prefix
	// KeepExtra leaves Settings.Extra as stored (a request without
	// settings.extra, as NetBird treats it).
	KeepExtra bool
	// KeepIPv6Groups leaves Settings.IPv6EnabledGroups as stored (a
	// request without ipv6_enabled_groups, as NetBird treats it).
	KeepIPv6Groups bool
}

// ErrNetworkTooSmall is a network range with fewer host addresses than
// the account has peers.
var ErrNetworkTooSmall = fmt.Errorf("%w: network_range is too small", ErrInvalid)

// UpdateAccount replaces an account's settings and, when given, its DNS
// domain and overlay network, in one transaction: a new network moves
// every peer to an address in it (keeping the host part where it fits).
// It is a network change: every map is pushed again.
func (s *Service) UpdateAccount(ctx context.Context, acc account.ID, u AccountUpdate, initiator string) (account.Account, error) {
	if err := u.Settings.Validate(); err != nil {
		return account.Account{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var a account.Account
	err := s.store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		old, err := at.Lock(ctx)
		if err != nil {
			return err
		}
		if u.KeepExtra {
			u.Settings.Extra = old.Settings.Extra
		}
		if u.KeepIPv6Groups {
			u.Settings.IPv6EnabledGroups = old.Settings.IPv6EnabledGroups
		}
		now := s.now().UTC()
		event := func(activity string, meta map[string]string) error {
			_, err := at.InsertEvent(ctx, account.Event{At: now, Activity: activity, Initiator: initiator, Target: string(acc), Meta: meta})
			return err
		}
		if !reflect.DeepEqual(old.Settings, u.Settings) {
			if err := at.UpdateSettings(ctx, u.Settings); err != nil {
				return err
			}
			for _, e := range account.SettingsEvents(old.Settings, u.Settings) {
				if err := event(e.Activity, e.Meta); err != nil {
					return err
				}
			}
			if u.Settings.GroupsPropagationEnabled && !old.Settings.GroupsPropagationEnabled {
				if err := propagateAll(ctx, at); err != nil {
					return err
				}
			}
			// Turning peer approval off approves the pending peers.
			if _, err := ApproveOnSettingsChange(ctx, at, old.Settings, u.Settings, initiator, now); err != nil {
				return err
			}
		}
		if u.Domain != "" && u.Domain != old.Domain {
			if err := CheckDomainZones(ctx, at, u.Domain); err != nil {
				return err
			}
			if err := at.SetDomain(ctx, u.Domain); err != nil {
				return err
			}
			if err := event("account.dns.domain.update", map[string]string{"old": old.Domain, "new": u.Domain}); err != nil {
				return err
			}
		}
		if u.Network.IsValid() && u.Network.Masked() != old.Network.Masked() {
			if err := readdress(ctx, at, old.Network, u.Network.Masked()); err != nil {
				return err
			}
			if err := event("account.network.range.update", map[string]string{"old": old.Network.String(), "new": u.Network.Masked().String()}); err != nil {
				return err
			}
		}
		if err := updateIPv6(ctx, at, old, u, event); err != nil {
			return err
		}
		if _, err := at.BumpSerial(ctx); err != nil {
			return err
		}
		a, err = at.Account(ctx)
		return err
	})
	if err != nil {
		return account.Account{}, fmt.Errorf("update account: %w", err)
	}
	s.notify.AccountChanged(acc)
	return a, nil
}

// updateIPv6 applies a new IPv6 range and enabled groups: the groups must
// exist, a new range moves the IPv6 peers, and then every peer's address
// follows the rule (v6addr.Reconcile).
func updateIPv6(ctx context.Context, at *store.AccountTx, old account.Account, u AccountUpdate, event func(string, map[string]string) error) error {
	for _, id := range u.Settings.IPv6EnabledGroups {
		if _, err := at.Group(ctx, id); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: ipv6_enabled_groups names group %q, which does not exist", ErrInvalid, id)
		} else if err != nil {
			return err
		}
	}
	moved := u.NetworkV6.IsValid() && u.NetworkV6.Masked() != old.NetworkV6.Masked()
	if moved {
		if err := v6addr.Readdress(ctx, at, u.NetworkV6.Masked()); errors.Is(err, v6addr.ErrNetworkTooSmall) {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		} else if err != nil {
			return err
		}
		if err := event("account.network.range.update", map[string]string{"old": old.NetworkV6.String(), "new": u.NetworkV6.Masked().String()}); err != nil {
			return err
		}
	}
	if !moved && slices.Equal(old.Settings.IPv6EnabledGroups, u.Settings.IPv6EnabledGroups) {
		return nil
	}
	cur, err := at.Account(ctx)
	if err != nil {
		return err
	}
	if _, err = v6addr.Reconcile(ctx, at, cur); errors.Is(err, v6addr.ErrNetworkTooSmall) {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return err
}

// CheckDomainZones refuses d as the peers' DNS domain when a custom zone's
// domain is d or a name below it: the agents answer the peers' domain
// from the network map's peer names, so such a zone would shadow them or
// be shadowed (zone creation refuses the same clash the other way round).
func CheckDomainZones(ctx context.Context, at *store.AccountTx, d string) error {
	zs, err := at.Zones(ctx)
	if err != nil {
		return err
	}
	d = strings.ToLower(strings.TrimSuffix(d, "."))
	for _, z := range zs {
		zd := strings.ToLower(z.Domain)
		if zd == d || strings.HasSuffix(zd, "."+d) {
			return fmt.Errorf("%w: dns_domain %s conflicts with the custom DNS zone %s (%s); delete the zone or choose another domain", ErrInvalid, d, z.Domain, z.Name)
		}
	}
	return nil
}

// readdress moves the account's peers from network from to network to.
func readdress(ctx context.Context, at *store.AccountTx, from, to netip.Prefix) error {
	ps, err := at.Peers(ctx)
	if err != nil {
		return err
	}
	if len(ps) > account.Hosts(to) {
		return fmt.Errorf("%w: %s holds %d peer addresses, the account has %d peers", ErrNetworkTooSmall, to, account.Hosts(to), len(ps))
	}
	old := make([]netip.Addr, len(ps))
	for i, p := range ps {
		old[i] = p.IP
	}
	ips, err := ipam.Readdress(from, to, old)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNetworkTooSmall, err)
	}
	m := make(map[account.PeerID]netip.Addr, len(ps))
	for i, p := range ps {
		m[p.ID] = ips[i]
	}
	return at.Readdress(ctx, to, m)
}

// propagateAll puts every user's peers into that user's auto groups, as
// turning groups propagation on does.
func propagateAll(ctx context.Context, at *store.AccountTx) error {
	us, err := at.Users(ctx)
	if err != nil {
		return err
	}
	add := map[account.GroupID][]account.PeerID{}
	for _, u := range us {
		if len(u.AutoGroups) == 0 {
			continue
		}
		ps, err := at.UserPeers(ctx, u.ID)
		if err != nil {
			return err
		}
		for _, g := range u.AutoGroups {
			for _, p := range ps {
				add[account.GroupID(g)] = append(add[account.GroupID(g)], p.ID)
			}
		}
	}
	var changed []account.GroupID
	for gid, ids := range add {
		g, err := at.Group(ctx, gid)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if g.All {
			continue
		}
		n := len(g.Peers)
		for _, id := range ids {
			if !slices.Contains(g.Peers, id) {
				g.Peers = append(g.Peers, id)
			}
		}
		if len(g.Peers) != n {
			if err := at.PutGroup(ctx, g); err != nil {
				return err
			}
			changed = append(changed, gid)
		}
	}
	_, err = v6addr.GroupsChanged(ctx, at, changed...)
	return err
}

// sameNetwork makes a registration that picked its address before a
// concurrent network change committed try again (Login retries on
// ErrConflict): called once the serial bump holds the account row, it
// sees the committed network. It returns the account as committed.
func sameNetwork(ctx context.Context, at *store.AccountTx, acc account.Account) (account.Account, error) {
	cur, err := at.Account(ctx)
	if err != nil {
		return cur, err
	}
	if cur.Network != acc.Network || cur.NetworkV6 != acc.NetworkV6 {
		return cur, fmt.Errorf("register: the network range changed: %w", store.ErrConflict)
	}
	return cur, nil
}

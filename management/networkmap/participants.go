package networkmap

import (
	"context"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
)

// Participants keeps the peers that take part in the account's network
// at now: not those of blocked users, not those whose login or
// inactivity expired. Maps are computed over them.
func Participants(a account.Account, ps []account.Peer, blocked map[account.UserID]bool, now time.Time) []account.Peer {
	out := ps[:0:0]
	for _, p := range ps {
		if p.UserID != "" && blocked[p.UserID] {
			continue
		}
		if a.Settings.Expired(p, now) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Source is the state of one account maps are computed from, as a store
// transaction scoped to that account reads it.
type Source interface {
	Account(ctx context.Context) (account.Account, error)
	Peers(ctx context.Context) ([]account.Peer, error)
	BlockedUsers(ctx context.Context) (map[account.UserID]bool, error)
	Groups(ctx context.Context) ([]account.Group, error)
	Policies(ctx context.Context) ([]account.Policy, error)
	PostureChecks(ctx context.Context) ([]account.PostureCheck, error)
	Routes(ctx context.Context) ([]account.Route, error)
	NetworkResources(ctx context.Context) ([]account.NetworkResource, error)
	NetworkRouters(ctx context.Context) ([]account.NetworkRouter, error)
	NameserverGroups(ctx context.Context) ([]account.NameserverGroup, error)
	DNSSettings(ctx context.Context) (account.DNSSettings, error)
	Zones(ctx context.Context) ([]account.Zone, error) // each with its records
}

// Read loads what the account's maps are computed from at now: the
// account, its Participants, its access rules, its routes and network
// resources, and its DNS.
func Read(ctx context.Context, src Source, now time.Time) (account.Account, []account.Peer, Access, error) {
	var access Access
	a, err := src.Account(ctx)
	if err != nil {
		return a, nil, access, err
	}
	ps, err := src.Peers(ctx)
	if err != nil {
		return a, nil, access, err
	}
	blocked, err := src.BlockedUsers(ctx)
	if err != nil {
		return a, nil, access, err
	}
	if access.Groups, err = src.Groups(ctx); err != nil {
		return a, nil, access, err
	}
	if access.Policies, err = src.Policies(ctx); err != nil {
		return a, nil, access, err
	}
	if access.PostureChecks, err = src.PostureChecks(ctx); err != nil {
		return a, nil, access, err
	}
	if access.Routes, err = src.Routes(ctx); err != nil {
		return a, nil, access, err
	}
	if access.Resources, err = src.NetworkResources(ctx); err != nil {
		return a, nil, access, err
	}
	if access.Routers, err = src.NetworkRouters(ctx); err != nil {
		return a, nil, access, err
	}
	if access.NameserverGroups, err = src.NameserverGroups(ctx); err != nil {
		return a, nil, access, err
	}
	if access.DNSSettings, err = src.DNSSettings(ctx); err != nil {
		return a, nil, access, err
	}
	if access.Zones, err = src.Zones(ctx); err != nil {
		return a, nil, access, err
	}
	return a, Participants(a, ps, blocked, now), access, nil
}

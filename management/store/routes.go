package store

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/wiremesh/wiremesh/management/account"
)

// This file stores routes, networks, network resources and network
// routers. Every write bumps the view revision (as group and policy writes
// do); the serial bump that makes servers push new maps is the domain
// service's, once per change.

// groupIDs encodes a group list as JSON ("[]" for none).
func groupIDs(ids []account.GroupID) (string, error) {
	if ids == nil {
		ids = []account.GroupID{}
	}
	b, err := json.Marshal(ids)
	return string(b), err
}

func parseGroupIDs(what, id, s string) ([]account.GroupID, error) {
	var out []account.GroupID
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("%s %s: bad group list: %w", what, id, err)
	}
	return out, nil
}

// parsePrefix reads a stored prefix; "" is the zero (invalid) prefix.
func parsePrefix(what, id, s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, fmt.Errorf("%s %s: bad prefix: %w", what, id, err)
	}
	return p, nil
}

func prefixText(p netip.Prefix) string {
	if !p.IsValid() {
		return ""
	}
	return p.String()
}

// upsert runs update and, when it touched no row, insert.
func (a *AccountTx) upsert(ctx context.Context, update string, updateArgs []any, insert string, insertArgs []any) error {
	n, err := a.q().exec(ctx, update, updateArgs...)
	if err != nil {
		return mapErr(err)
	}
	if n == 1 {
		return nil
	}
	_, err = a.q().exec(ctx, insert, insertArgs...)
	return mapErr(err)
}

// --- routes ---

const routeCols = `id, account_id, net_id, description, enabled, peer, peer_groups, network, domains, keep_route, metric, masquerade, group_ids, access_control_groups, skip_auto_apply`

func scanRoute(sc scanner) (account.Route, error) {
	var (
		r                                      account.Route
		id, acc, peer, pgs, nw, doms, gs, acgs string
		err                                    error
	)
	if err := sc.Scan(&id, &acc, &r.NetID, &r.Description, &r.Enabled, &peer, &pgs, &nw, &doms, &r.KeepRoute, &r.Metric, &r.Masquerade, &gs, &acgs, &r.SkipAutoApply); err != nil {
		return r, mapErr(err)
	}
	r.ID, r.AccountID, r.Peer = account.RouteID(id), account.ID(acc), account.PeerID(peer)
	if r.PeerGroups, err = parseGroupIDs("route", id, pgs); err != nil {
		return r, err
	}
	if r.Groups, err = parseGroupIDs("route", id, gs); err != nil {
		return r, err
	}
	if r.AccessControlGroups, err = parseGroupIDs("route", id, acgs); err != nil {
		return r, err
	}
	if r.Network, err = parsePrefix("route", id, nw); err != nil {
		return r, err
	}
	if err := json.Unmarshal([]byte(doms), &r.Domains); err != nil {
		return r, fmt.Errorf("route %s: bad domains: %w", id, err)
	}
	return r, nil
}

// Routes lists the account's routes by network ID, then ID.
func (a *AccountTx) Routes(ctx context.Context) ([]account.Route, error) {
	return queryAll(ctx, a.q(), scanRoute, `SELECT `+routeCols+` FROM routes WHERE account_id = ? ORDER BY net_id, id`, string(a.id))
}

// Route finds one of the account's routes.
func (a *AccountTx) Route(ctx context.Context, id account.RouteID) (account.Route, error) {
	return scanRoute(a.q().queryRow(ctx, `SELECT `+routeCols+` FROM routes WHERE id = ? AND account_id = ?`, string(id), string(a.id)))
}

// PutRoute inserts or replaces a route.
func (a *AccountTx) PutRoute(ctx context.Context, r account.Route) error {
	if err := a.owns("route", r.AccountID); err != nil {
		return err
	}
	pgs, err := groupIDs(r.PeerGroups)
	if err != nil {
		return err
	}
	gs, err := groupIDs(r.Groups)
	if err != nil {
		return err
	}
	acgs, err := groupIDs(r.AccessControlGroups)
	if err != nil {
		return err
	}
	doms, err := jsonList(r.Domains)
	if err != nil {
		return err
	}
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	vals := []any{r.NetID, r.Description, r.Enabled, string(r.Peer), pgs, prefixText(r.Network), doms, r.KeepRoute, r.Metric, r.Masquerade, gs, acgs, r.SkipAutoApply}
	return a.upsert(ctx,
		`UPDATE routes SET net_id = ?, description = ?, enabled = ?, peer = ?, peer_groups = ?, network = ?, domains = ?, keep_route = ?, metric = ?, masquerade = ?, group_ids = ?, access_control_groups = ?, skip_auto_apply = ? WHERE id = ? AND account_id = ?`,
		append(vals, string(r.ID), string(a.id)),
		`INSERT INTO routes (`+routeCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		append([]any{string(r.ID), string(a.id)}, vals...))
}

// DeleteRoute removes a route.
func (a *AccountTx) DeleteRoute(ctx context.Context, id account.RouteID) error {
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `DELETE FROM routes WHERE id = ? AND account_id = ?`, string(id), string(a.id))
	return affected(n, err)
}

// detachRoutingPeer drops a deleted peer from what routes through it, as
// NetBird's account model does: a route it was the single routing peer of
// is disabled and keeps no peer (an admin gives it a new one), and a
// network router of that peer alone is removed. Routes and routers of
// peer groups need nothing: the peer just leaves the groups' members.
func (a *AccountTx) detachRoutingPeer(ctx context.Context, id account.PeerID) error {
	if _, err := a.q().exec(ctx, `UPDATE routes SET enabled = FALSE, peer = '' WHERE peer = ? AND account_id = ?`, string(id), string(a.id)); err != nil {
		return mapErr(err)
	}
	_, err := a.q().exec(ctx, `DELETE FROM network_routers WHERE peer = ? AND account_id = ?`, string(id), string(a.id))
	return mapErr(err)
}

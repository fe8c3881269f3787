package store

import (
	"context"

	"github.com/wiremesh/wiremesh/management/account"
)

// This file stores networks with their resources and routers. Deleting a
// network deletes its resources and routers (foreign keys cascade).

const networkCols = `id, account_id, name, description`

func scanNetwork(sc scanner) (account.Network, error) {
	var (
		n       account.Network
		id, acc string
	)
	if err := sc.Scan(&id, &acc, &n.Name, &n.Description); err != nil {
		return n, mapErr(err)
	}
	n.ID, n.AccountID = account.NetworkID(id), account.ID(acc)
	return n, nil
}

// Networks lists the account's networks by name.
func (a *AccountTx) Networks(ctx context.Context) ([]account.Network, error) {
	return queryAll(ctx, a.q(), scanNetwork, `SELECT `+networkCols+` FROM networks WHERE account_id = ? ORDER BY name, id`, string(a.id))
}

// Network finds one of the account's networks.
func (a *AccountTx) Network(ctx context.Context, id account.NetworkID) (account.Network, error) {
	return scanNetwork(a.q().queryRow(ctx, `SELECT `+networkCols+` FROM networks WHERE id = ? AND account_id = ?`, string(id), string(a.id)))
}

// PutNetwork inserts or replaces a network.
func (a *AccountTx) PutNetwork(ctx context.Context, n account.Network) error {
	if err := a.owns("network", n.AccountID); err != nil {
		return err
	}
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	return a.upsert(ctx,
		`UPDATE networks SET name = ?, description = ? WHERE id = ? AND account_id = ?`,
		[]any{n.Name, n.Description, string(n.ID), string(a.id)},
		`INSERT INTO networks (`+networkCols+`) VALUES (?, ?, ?, ?)`,
		[]any{string(n.ID), string(a.id), n.Name, n.Description})
}

// DeleteNetwork removes a network with its resources and routers. The
// children are deleted explicitly too, so that the result does not depend
// on the engine enforcing foreign keys.
func (a *AccountTx) DeleteNetwork(ctx context.Context, id account.NetworkID) error {
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	for _, t := range []string{"network_resources", "network_routers"} {
		if _, err := a.q().exec(ctx, `DELETE FROM `+t+` WHERE network_id = ? AND account_id = ?`, string(id), string(a.id)); err != nil {
			return mapErr(err)
		}
	}
	n, err := a.q().exec(ctx, `DELETE FROM networks WHERE id = ? AND account_id = ?`, string(id), string(a.id))
	return affected(n, err)
}

// --- resources ---

const resourceCols = `id, account_id, network_id, name, description, type, address, prefix, domain, enabled, group_ids`

func scanResource(sc scanner) (account.NetworkResource, error) {
	var (
		r                    account.NetworkResource
		id, acc, nw, pfx, gs string
		err                  error
	)
	if err := sc.Scan(&id, &acc, &nw, &r.Name, &r.Description, &r.Type, &r.Address, &pfx, &r.Domain, &r.Enabled, &gs); err != nil {
		return r, mapErr(err)
	}
	r.ID, r.AccountID, r.NetworkID = account.NetworkResourceID(id), account.ID(acc), account.NetworkID(nw)
	if r.Prefix, err = parsePrefix("network resource", id, pfx); err != nil {
		return r, err
	}
	if r.Groups, err = parseGroupIDs("network resource", id, gs); err != nil {
		return r, err
	}
	return r, nil
}

// NetworkResources lists the resources of all the account's networks, by
// network, then name.
func (a *AccountTx) NetworkResources(ctx context.Context) ([]account.NetworkResource, error) {
	return queryAll(ctx, a.q(), scanResource, `SELECT `+resourceCols+` FROM network_resources WHERE account_id = ? ORDER BY network_id, name, id`, string(a.id))
}

// NetworkResource finds one resource of the account.
func (a *AccountTx) NetworkResource(ctx context.Context, id account.NetworkResourceID) (account.NetworkResource, error) {
	return scanResource(a.q().queryRow(ctx, `SELECT `+resourceCols+` FROM network_resources WHERE id = ? AND account_id = ?`, string(id), string(a.id)))
}

// PutNetworkResource inserts or replaces a resource; a name another
// resource of the account has is ErrConflict, a network that does not
// exist ErrNotFound.
func (a *AccountTx) PutNetworkResource(ctx context.Context, r account.NetworkResource) error {
	if err := a.owns("network resource", r.AccountID); err != nil {
		return err
	}
	if _, err := a.Network(ctx, r.NetworkID); err != nil {
		return err
	}
	gs, err := groupIDs(r.Groups)
	if err != nil {
		return err
	}
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	vals := []any{string(r.NetworkID), r.Name, r.Description, r.Type, r.Address, prefixText(r.Prefix), r.Domain, r.Enabled, gs}
	return a.upsert(ctx,
		`UPDATE network_resources SET network_id = ?, name = ?, description = ?, type = ?, address = ?, prefix = ?, domain = ?, enabled = ?, group_ids = ? WHERE id = ? AND account_id = ?`,
		append(vals, string(r.ID), string(a.id)),
		`INSERT INTO network_resources (`+resourceCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		append([]any{string(r.ID), string(a.id)}, vals...))
}

// DeleteNetworkResource removes a resource.
func (a *AccountTx) DeleteNetworkResource(ctx context.Context, id account.NetworkResourceID) error {
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `DELETE FROM network_resources WHERE id = ? AND account_id = ?`, string(id), string(a.id))
	return affected(n, err)
}

// --- routers ---

const routerCols = `id, account_id, network_id, peer, peer_groups, metric, masquerade, enabled`

func scanRouter(sc scanner) (account.NetworkRouter, error) {
	var (
		r                     account.NetworkRouter
		id, acc, nw, peer, gs string
		err                   error
	)
	if err := sc.Scan(&id, &acc, &nw, &peer, &gs, &r.Metric, &r.Masquerade, &r.Enabled); err != nil {
		return r, mapErr(err)
	}
	r.ID, r.AccountID, r.NetworkID, r.Peer = account.NetworkRouterID(id), account.ID(acc), account.NetworkID(nw), account.PeerID(peer)
	if r.PeerGroups, err = parseGroupIDs("network router", id, gs); err != nil {
		return r, err
	}
	return r, nil
}

// NetworkRouters lists the routers of all the account's networks, by
// network, then ID.
func (a *AccountTx) NetworkRouters(ctx context.Context) ([]account.NetworkRouter, error) {
	return queryAll(ctx, a.q(), scanRouter, `SELECT `+routerCols+` FROM network_routers WHERE account_id = ? ORDER BY network_id, id`, string(a.id))
}

// NetworkRouter finds one router of the account.
func (a *AccountTx) NetworkRouter(ctx context.Context, id account.NetworkRouterID) (account.NetworkRouter, error) {
	return scanRouter(a.q().queryRow(ctx, `SELECT `+routerCols+` FROM network_routers WHERE id = ? AND account_id = ?`, string(id), string(a.id)))
}

// PutNetworkRouter inserts or replaces a router; a network that does not
// exist is ErrNotFound.
func (a *AccountTx) PutNetworkRouter(ctx context.Context, r account.NetworkRouter) error {
	if err := a.owns("network router", r.AccountID); err != nil {
		return err
	}
	if _, err := a.Network(ctx, r.NetworkID); err != nil {
		return err
	}
	gs, err := groupIDs(r.PeerGroups)
	if err != nil {
		return err
	}
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	vals := []any{string(r.NetworkID), string(r.Peer), gs, r.Metric, r.Masquerade, r.Enabled}
	return a.upsert(ctx,
		`UPDATE network_routers SET network_id = ?, peer = ?, peer_groups = ?, metric = ?, masquerade = ?, enabled = ? WHERE id = ? AND account_id = ?`,
		append(vals, string(r.ID), string(a.id)),
		`INSERT INTO network_routers (`+routerCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		append([]any{string(r.ID), string(a.id)}, vals...))
}

// DeleteNetworkRouter removes a router.
func (a *AccountTx) DeleteNetworkRouter(ctx context.Context, id account.NetworkRouterID) error {
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `DELETE FROM network_routers WHERE id = ? AND account_id = ?`, string(id), string(a.id))
	return affected(n, err)
}

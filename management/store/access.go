package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wiremesh/wiremesh/management/account"
)

// DefaultAccess returns the built-in All group and the Default All-to-All
// policy of an account, with the IDs migration 0003 gives them.
func DefaultAccess(acc account.ID) (account.Group, account.Policy) {
	all := account.Group{ID: account.GroupID("all-" + acc), AccountID: acc, Name: "All", All: true, Peers: []account.PeerID{}}
	pol := account.Policy{ID: account.PolicyID("default-" + acc), AccountID: acc, Name: "Default",
		Description: "This is a default rule that allows connections between all the resources", Enabled: true,
		Rules: []account.Rule{{ID: "default-" + string(acc), Name: "Default", Enabled: true, Action: account.ActionAccept,
			Protocol: account.ProtoAll, Bidirectional: true, Sources: []account.GroupID{all.ID}, Destinations: []account.GroupID{all.ID}}}}
	return all, pol
}

const groupCols = `id, account_id, name, is_all, peers`

func scanGroup(sc scanner) (account.Group, error) {
	var (
		g           account.Group
		id, acc, ps string
	)
	if err := sc.Scan(&id, &acc, &g.Name, &g.All, &ps); err != nil {
		return g, mapErr(err)
	}
	if err := json.Unmarshal([]byte(ps), &g.Peers); err != nil {
		return g, fmt.Errorf("group %s: bad members: %w", id, err)
	}
	g.ID, g.AccountID = account.GroupID(id), account.ID(acc)
	return g, nil
}

// Groups lists the account's groups by name.
func (a *AccountTx) Groups(ctx context.Context) ([]account.Group, error) {
	return queryAll(ctx, a.q(), scanGroup, `SELECT `+groupCols+` FROM peer_groups WHERE account_id = ? ORDER BY name`, string(a.id))
}

// Group finds one of the account's groups by ID.
func (a *AccountTx) Group(ctx context.Context, id account.GroupID) (account.Group, error) {
	return scanGroup(a.q().queryRow(ctx, `SELECT `+groupCols+` FROM peer_groups WHERE id = ? AND account_id = ?`, string(id), string(a.id)))
}

// GroupByName finds one of the account's groups by name.
func (a *AccountTx) GroupByName(ctx context.Context, name string) (account.Group, error) {
	return scanGroup(a.q().queryRow(ctx, `SELECT `+groupCols+` FROM peer_groups WHERE name = ? AND account_id = ?`, name, string(a.id)))
}

// PutGroup inserts or replaces a group. A duplicate name is ErrConflict.
func (a *AccountTx) PutGroup(ctx context.Context, g account.Group) error {
	if err := a.owns("group", g.AccountID); err != nil {
		return err
	}
	if g.Peers == nil {
		g.Peers = []account.PeerID{}
	}
	ps, err := json.Marshal(g.Peers)
	if err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `UPDATE peer_groups SET name = ?, is_all = ?, peers = ? WHERE id = ? AND account_id = ?`,
		g.Name, g.All, string(ps), string(g.ID), string(a.id))
	if err != nil {
		return mapErr(err)
	}
	if n == 1 {
		return nil
	}
	_, err = a.q().exec(ctx, `INSERT INTO peer_groups (`+groupCols+`) VALUES (?, ?, ?, ?, ?)`, string(g.ID), string(a.id), g.Name, g.All, string(ps))
	return mapErr(err)
}

// DeleteGroup removes a group.
func (a *AccountTx) DeleteGroup(ctx context.Context, id account.GroupID) error {
	n, err := a.q().exec(ctx, `DELETE FROM peer_groups WHERE id = ? AND account_id = ?`, string(id), string(a.id))
	return affected(n, err)
}

const policyCols = `id, account_id, name, description, enabled, rules`

func scanPolicy(sc scanner) (account.Policy, error) {
	var (
		p              account.Policy
		id, acc, rules string
	)
	if err := sc.Scan(&id, &acc, &p.Name, &p.Description, &p.Enabled, &rules); err != nil {
		return p, mapErr(err)
	}
	if err := json.Unmarshal([]byte(rules), &p.Rules); err != nil {
		return p, fmt.Errorf("policy %s: bad rules: %w", id, err)
	}
	p.ID, p.AccountID = account.PolicyID(id), account.ID(acc)
	return p, nil
}

// Policies lists the account's policies by name.
func (a *AccountTx) Policies(ctx context.Context) ([]account.Policy, error) {
	return queryAll(ctx, a.q(), scanPolicy, `SELECT `+policyCols+` FROM policies WHERE account_id = ? ORDER BY name, id`, string(a.id))
}

// Policy finds one of the account's policies by ID.
func (a *AccountTx) Policy(ctx context.Context, id account.PolicyID) (account.Policy, error) {
	return scanPolicy(a.q().queryRow(ctx, `SELECT `+policyCols+` FROM policies WHERE id = ? AND account_id = ?`, string(id), string(a.id)))
}

// PutPolicy inserts or replaces a policy.
func (a *AccountTx) PutPolicy(ctx context.Context, p account.Policy) error {
	if err := a.owns("policy", p.AccountID); err != nil {
		return err
	}
	if p.Rules == nil {
		p.Rules = []account.Rule{}
	}
	rules, err := json.Marshal(p.Rules)
	if err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `UPDATE policies SET name = ?, description = ?, enabled = ?, rules = ? WHERE id = ? AND account_id = ?`,
		p.Name, p.Description, p.Enabled, string(rules), string(p.ID), string(a.id))
	if err != nil {
		return mapErr(err)
	}
	if n == 1 {
		return nil
	}
	_, err = a.q().exec(ctx, `INSERT INTO policies (`+policyCols+`) VALUES (?, ?, ?, ?, ?, ?)`,
		string(p.ID), string(a.id), p.Name, p.Description, p.Enabled, string(rules))
	return mapErr(err)
}

// DeletePolicy removes a policy.
func (a *AccountTx) DeletePolicy(ctx context.Context, id account.PolicyID) error {
	n, err := a.q().exec(ctx, `DELETE FROM policies WHERE id = ? AND account_id = ?`, string(id), string(a.id))
	return affected(n, err)
}

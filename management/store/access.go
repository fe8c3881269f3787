package store

import (
	"context"
	"encoding/json"
	"errors"
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
	if err := a.bumpView(ctx); err != nil {
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
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `DELETE FROM peer_groups WHERE id = ? AND account_id = ?`, string(id), string(a.id))
	return affected(n, err)
}

const policyCols = `id, account_id, name, description, enabled, rules, posture_checks`

func scanPolicy(sc scanner) (account.Policy, error) {
	var (
		p                      account.Policy
		id, acc, rules, checks string
	)
	if err := sc.Scan(&id, &acc, &p.Name, &p.Description, &p.Enabled, &rules, &checks); err != nil {
		return p, mapErr(err)
	}
	if err := json.Unmarshal([]byte(rules), &p.Rules); err != nil {
		return p, fmt.Errorf("policy %s: bad rules: %w", id, err)
	}
	if err := json.Unmarshal([]byte(checks), &p.PostureChecks); err != nil {
		return p, fmt.Errorf("policy %s: bad posture checks: %w", id, err)
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
	checks, err := jsonList(p.PostureChecks)
	if err != nil {
		return err
	}
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `UPDATE policies SET name = ?, description = ?, enabled = ?, rules = ?, posture_checks = ? WHERE id = ? AND account_id = ?`,
		p.Name, p.Description, p.Enabled, string(rules), checks, string(p.ID), string(a.id))
	if err != nil {
		return mapErr(err)
	}
	if n == 1 {
		return nil
	}
	_, err = a.q().exec(ctx, `INSERT INTO policies (`+policyCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		string(p.ID), string(a.id), p.Name, p.Description, p.Enabled, string(rules), checks)
	return mapErr(err)
}

// DeletePolicy removes a policy.
func (a *AccountTx) DeletePolicy(ctx context.Context, id account.PolicyID) error {
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `DELETE FROM policies WHERE id = ? AND account_id = ?`, string(id), string(a.id))
	return affected(n, err)
}

// --- posture checks ---

const postureCols = `id, account_id, name, description, checks`

func scanPosture(sc scanner) (account.PostureCheck, error) {
	var (
		c               account.PostureCheck
		id, acc, checks string
	)
	if err := sc.Scan(&id, &acc, &c.Name, &c.Description, &checks); err != nil {
		return c, mapErr(err)
	}
	if err := json.Unmarshal([]byte(checks), &c.Checks); err != nil {
		return c, fmt.Errorf("posture check %s: bad checks: %w", id, err)
	}
	c.ID, c.AccountID = account.PostureCheckID(id), account.ID(acc)
	return c, nil
}

// PostureChecks lists the account's posture checks by name.
func (a *AccountTx) PostureChecks(ctx context.Context) ([]account.PostureCheck, error) {
	return queryAll(ctx, a.q(), scanPosture, `SELECT `+postureCols+` FROM posture_checks WHERE account_id = ? ORDER BY name, id`, string(a.id))
}

// PostureCheck finds one of the account's posture checks.
func (a *AccountTx) PostureCheck(ctx context.Context, id account.PostureCheckID) (account.PostureCheck, error) {
	return scanPosture(a.q().queryRow(ctx, `SELECT `+postureCols+` FROM posture_checks WHERE id = ? AND account_id = ?`, string(id), string(a.id)))
}

// PutPostureCheck inserts or replaces a posture check; a duplicate name is
// ErrConflict.
func (a *AccountTx) PutPostureCheck(ctx context.Context, c account.PostureCheck) error {
	if err := a.owns("posture check", c.AccountID); err != nil {
		return err
	}
	checks, err := json.Marshal(c.Checks)
	if err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `UPDATE posture_checks SET name = ?, description = ?, checks = ? WHERE id = ? AND account_id = ?`,
		c.Name, c.Description, string(checks), string(c.ID), string(a.id))
	if err != nil {
		return mapErr(err)
	}
	if n == 1 {
		return nil
	}
	_, err = a.q().exec(ctx, `INSERT INTO posture_checks (`+postureCols+`) VALUES (?, ?, ?, ?, ?)`, string(c.ID), string(a.id), c.Name, c.Description, string(checks))
	return mapErr(err)
}

// DeletePostureCheck removes a posture check.
func (a *AccountTx) DeletePostureCheck(ctx context.Context, id account.PostureCheckID) error {
	n, err := a.q().exec(ctx, `DELETE FROM posture_checks WHERE id = ? AND account_id = ?`, string(id), string(a.id))
	return affected(n, err)
}

// MissingGroup returns the first of ids that is not a group of the
// account ("" when all exist).
func (a *AccountTx) MissingGroup(ctx context.Context, ids []string) (string, error) {
	for _, id := range ids {
		if _, err := a.Group(ctx, account.GroupID(id)); errors.Is(err, ErrNotFound) {
			return id, nil
		} else if err != nil {
			return "", err
		}
	}
	return "", nil
}

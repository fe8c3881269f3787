package routing

import (
	"context"
	"slices"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// refs answers, inside one transaction, what a change names: the
// account, its peers and groups, read once.
type refs struct {
	acct   account.Account
	groups map[account.GroupID]account.Group
	// peers are the account's peers, oldest first; group member lists
	// may still name deleted peers, which count for nothing.
	peers  []account.PeerID
	exists map[account.PeerID]bool
}

func loadRefs(ctx context.Context, at *store.AccountTx) (refs, error) {
	var r refs
	var err error
	if r.acct, err = at.Account(ctx); err != nil {
		return r, err
	}
	gs, err := at.Groups(ctx)
	if err != nil {
		return r, err
	}
	r.groups = make(map[account.GroupID]account.Group, len(gs))
	for _, g := range gs {
		r.groups[g.ID] = g
	}
	names, err := at.PeerNames(ctx)
	r.exists = make(map[account.PeerID]bool, len(names))
	for _, n := range names {
		r.peers = append(r.peers, n.ID)
		r.exists[n.ID] = true
	}
	return r, err
}

// peer refuses a peer that is not the account's.
func (r refs) peer(field string, id account.PeerID) error {
	if !r.exists[id] {
		return invalid("%s: peer %q does not exist", field, id)
	}
	return nil
}

// groupList refuses unknown groups and drops repeats.
func (r refs) groupList(field string, ids []account.GroupID) ([]account.GroupID, error) {
	out := []account.GroupID{}
	for _, id := range ids {
		if _, ok := r.groups[id]; !ok {
			return nil, invalid("%s: group %q does not exist", field, id)
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// members lists a group's existing peers (the All group holds every
// peer).
func (r refs) members(id account.GroupID) []account.PeerID {
	g := r.groups[id]
	if g.All {
		return r.peers
	}
	out := make([]account.PeerID, 0, len(g.Peers))
	for _, p := range g.Peers {
		if r.exists[p] {
			out = append(out, p)
		}
	}
	return out
}

// routingGroups checks peer_groups: they exist and each has a peer (a
// group without peers would route nowhere, silently).
func (r refs) routingGroups(ids []account.GroupID) ([]account.GroupID, error) {
	out, err := r.groupList("peer_groups", ids)
	if err != nil {
		return nil, err
	}
	for _, id := range out {
		if len(r.members(id)) == 0 {
			return nil, invalid("peer_groups: group %q (%s) has no peers to route through", r.groups[id].Name, id)
		}
	}
	return out, nil
}

package networkmap

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/management/account"
)

// source is an account's state in memory; fail makes one read fail.
type source struct {
	acc     account.Account
	peers   []account.Peer
	blocked map[account.UserID]bool
	access  Access
	fail    string
}

var errRead = errors.New("read failed")

func (s source) err(what string) error {
	if s.fail == what {
		return errRead
	}
	return nil
}

func (s source) Account(context.Context) (account.Account, error) { return s.acc, s.err("account") }
func (s source) Peers(context.Context) ([]account.Peer, error)    { return s.peers, s.err("peers") }
func (s source) BlockedUsers(context.Context) (map[account.UserID]bool, error) {
	return s.blocked, s.err("blocked")
}
func (s source) Groups(context.Context) ([]account.Group, error) {
	return s.access.Groups, s.err("groups")
}
func (s source) Policies(context.Context) ([]account.Policy, error) {
	return s.access.Policies, s.err("policies")
}
func (s source) PostureChecks(context.Context) ([]account.PostureCheck, error) {
	return s.access.PostureChecks, s.err("posture")
}
func (s source) Routes(context.Context) ([]account.Route, error) {
	return s.access.Routes, s.err("routes")
}
func (s source) NetworkResources(context.Context) ([]account.NetworkResource, error) {
	return s.access.Resources, s.err("resources")
}
func (s source) NetworkRouters(context.Context) ([]account.NetworkRouter, error) {
	return s.access.Routers, s.err("routers")
}

// TestRead: Read returns the account, its participants only (no blocked
// user's peer) and its access rules, and fails with any read.
func TestRead(t *testing.T) {
	src := source{
		acc:     account.Account{ID: "a", Domain: "d.test"},
		peers:   []account.Peer{{ID: "p1", UserID: "u1"}, {ID: "p2", UserID: "blocked"}, {ID: "p3"}},
		blocked: map[account.UserID]bool{"blocked": true},
		access:  defaults("a"),
	}
	src.access.Routes = []account.Route{{ID: "r1", NetID: "lan", Enabled: true, Peer: "p1", Network: netip.MustParsePrefix("10.1.0.0/16"), Groups: []account.GroupID{"all"}}}
	src.access.Resources = []account.NetworkResource{{ID: "res1", NetworkID: "n1", Type: account.ResourceHost, Prefix: netip.MustParsePrefix("10.2.0.1/32"), Enabled: true}}
	src.access.Routers = []account.NetworkRouter{{ID: "nr1", NetworkID: "n1", Peer: "p3", Enabled: true}}
	acc, ps, access, err := Read(context.Background(), src, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if acc.ID != "a" {
		t.Errorf("account = %q, want a", acc.ID)
	}
	var ids []account.PeerID
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	if d := cmp.Diff([]account.PeerID{"p1", "p3"}, ids); d != "" {
		t.Errorf("participants (-want +got):\n%s", d)
	}
	if d := cmp.Diff(src.access, access, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Errorf("access (-want +got):\n%s", d)
	}
	for _, what := range []string{"account", "peers", "blocked", "groups", "policies", "posture", "routes", "resources", "routers"} {
		src.fail = what
		if _, _, _, err := Read(context.Background(), src, time.Now()); !errors.Is(err, errRead) {
			t.Errorf("%s failing: err = %v, want %v", what, err, errRead)
		}
	}
}

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
func (s source) NameserverGroups(context.Context) ([]account.NameserverGroup, error) {
	return s.access.NameserverGroups, s.err("nameservers")
}
func (s source) DNSSettings(context.Context) (account.DNSSettings, error) {
	return s.access.DNSSettings, s.err("dns settings")
}
func (s source) Zones(context.Context) ([]account.Zone, error) { return s.access.Zones, s.err("zones") }

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
	src.access.NameserverGroups = []account.NameserverGroup{{ID: "ns1", Name: "corp", Enabled: true, Groups: []account.GroupID{"all"},
		Nameservers: []account.Nameserver{{IP: netip.MustParseAddr("10.0.0.53"), NSType: "udp", Port: 53}}, Domains: []string{"corp.example"}}}
	src.access.DNSSettings = account.DNSSettings{DisabledManagementGroups: []account.GroupID{"g1"}}
	src.access.Zones = []account.Zone{{ID: "z1", Domain: "zone.example", Enabled: true, DistributionGroups: []account.GroupID{"all"},
		Records: []account.Record{{ID: "r1", ZoneID: "z1", Name: "www.zone.example", Type: account.RecordA, Content: "10.0.0.8", TTL: 60}}}}
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
	if d := cmp.Diff(src.access, access, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
		cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
		t.Errorf("access (-want +got):\n%s", d)
	}
	for _, what := range []string{"account", "peers", "blocked", "groups", "policies", "posture", "routes", "resources", "routers", "nameservers", "dns settings", "zones"} {
		src.fail = what
		if _, _, _, err := Read(context.Background(), src, time.Now()); !errors.Is(err, errRead) {
			t.Errorf("%s failing: err = %v, want %v", what, err, errRead)
		}
	}
}

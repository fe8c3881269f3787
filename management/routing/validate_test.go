package routing

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/management/account"
)

func TestDomain(t *testing.T) {
	for _, c := range []struct {
		in, want string
		bad      bool
	}{
		{in: "example.com", want: "example.com"},
		{in: "Example.COM.", want: "example.com"},
		{in: "*.corp.example", want: "*.corp.example"},
		{in: "bücher.example", want: "xn--bcher-kva.example"},
		{in: "xn--bcher-kva.example", want: "xn--bcher-kva.example"},
		{in: "localhost", want: "localhost"},
		{in: "", bad: true},
		{in: "*.", bad: true},
		{in: "a..b", bad: true},
		{in: "-a.example", bad: true},
		{in: "under_score.example", bad: true},
		{in: "sp ace.example", bad: true},
		{in: "*.*.example", bad: true},
		{in: "a.*.example", bad: true},
		{in: strings.Repeat("a", 64) + ".example", bad: true},
		{in: strings.Repeat("abcdefghi.", 26) + "com", bad: true},
	} {
		got, err := Domain(c.in)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("Domain(%q) = %q, %v; want %q, error %v", c.in, got, err, c.want, c.bad)
		}
	}
}

func TestParseAddress(t *testing.T) {
	for _, c := range []struct {
		in, typ, prefix, domain string
		bad                     bool
	}{
		{in: "1.1.1.1", typ: account.ResourceHost, prefix: "1.1.1.1/32"},
		{in: "1.1.1.1/32", typ: account.ResourceHost, prefix: "1.1.1.1/32"},
		{in: "2001:db8::1", typ: account.ResourceHost, prefix: "2001:db8::1/128"},
		{in: "192.168.178.0/24", typ: account.ResourceSubnet, prefix: "192.168.178.0/24"},
		{in: "0.0.0.0/0", typ: account.ResourceSubnet, prefix: "0.0.0.0/0"},
		{in: " example.com ", typ: account.ResourceDomain, domain: "example.com"},
		{in: "*.Example.com", typ: account.ResourceDomain, domain: "*.example.com"},
		{in: "192.168.178.1/24", bad: true},
		{in: "10.0.0.0/33", bad: true},
		{in: "fe80::1%eth0", bad: true},
		{in: "", bad: true},
		{in: "not an address", bad: true},
	} {
		typ, p, d, err := ParseAddress(c.in)
		if (err != nil) != c.bad {
			t.Errorf("ParseAddress(%q): error %v, want error %v", c.in, err, c.bad)
			continue
		}
		if c.bad {
			continue
		}
		gotPrefix := ""
		if p.IsValid() {
			gotPrefix = p.String()
		}
		if typ != c.typ || gotPrefix != c.prefix || d != c.domain {
			t.Errorf("ParseAddress(%q) = %q %q %q, want %q %q %q", c.in, typ, gotPrefix, d, c.typ, c.prefix, c.domain)
		}
	}
}

func TestOverlay(t *testing.T) {
	acct := account.Account{Network: netip.MustParsePrefix("100.70.0.0/16")}
	for _, c := range []struct {
		p   string
		bad bool
	}{
		{"0.0.0.0/0", false}, // an exit node
		{"::/0", false},
		{"10.0.0.0/8", false},
		{"100.71.0.0/16", false},
		{"100.70.5.0/24", true}, // inside
		{"100.64.0.0/10", true}, // covering
		{"100.70.0.0/16", true}, // the same
		{"100.70.0.9/32", true}, // a peer's address
		{"fd00::/8", false},
	} {
		err := overlay("network", netip.MustParsePrefix(c.p), acct)
		if (err != nil) != c.bad {
			t.Errorf("overlay(%s): %v, want error %v", c.p, err, c.bad)
		}
	}
}

// TestDuplicate: NetBird's rule, one routing peer never routes the same
// destination twice; different peers for one destination are HA.
func TestDuplicate(t *testing.T) {
	rf := refs{
		groups: map[account.GroupID]account.Group{
			"gws":  {ID: "gws", Name: "gateways", Peers: []account.PeerID{"p1", "p2"}},
			"solo": {ID: "solo", Name: "solo", Peers: []account.PeerID{"p3"}},
		},
		exists: map[account.PeerID]bool{"p1": true, "p2": true, "p3": true},
	}
	lan := netip.MustParsePrefix("10.0.0.0/16")
	others := []account.Route{
		{ID: "a", NetID: "office", Peer: "p1", Network: lan},
		{ID: "b", NetID: "apps", PeerGroups: []account.GroupID{"solo"}, Domains: []string{"b.example", "a.example"}},
	}
	for _, c := range []struct {
		name string
		r    account.Route
		dup  bool
	}{
		{"HA twin through another peer", account.Route{ID: "n", NetID: "office", Peer: "p2", Network: lan}, false},
		{"same peer, other network_id", account.Route{ID: "n", NetID: "x", Peer: "p1", Network: lan}, true},
		{"group holding the peer", account.Route{ID: "n", NetID: "x", PeerGroups: []account.GroupID{"gws"}, Network: lan}, true},
		{"same peer, other prefix", account.Route{ID: "n", NetID: "x", Peer: "p1", Network: netip.MustParsePrefix("10.1.0.0/16")}, false},
		{"replacing itself", account.Route{ID: "a", NetID: "office", Peer: "p1", Network: lan}, false},
		{"same domains in another order, same group", account.Route{ID: "n", NetID: "y", PeerGroups: []account.GroupID{"solo"}, Domains: []string{"a.example", "b.example"}}, true},
		{"same domains, same peer", account.Route{ID: "n", NetID: "y", Peer: "p3", Domains: []string{"a.example", "b.example"}}, true},
		{"other domains", account.Route{ID: "n", NetID: "y", Peer: "p3", Domains: []string{"c.example"}}, false},
	} {
		err := rf.duplicate(c.r, others)
		if (err != nil) != c.dup {
			t.Errorf("%s: %v, want duplicate %v", c.name, err, c.dup)
		}
	}
}

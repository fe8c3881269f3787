package engine

import (
	"net/netip"
	"testing"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestClientRoutes: the map's Route messages as the official client reads
// them: Peer is the routing peer's key, NetworkType says prefix or
// domains, routes this peer serves (and their HA group) are not client
// routes, malformed ones are skipped.
func TestClientRoutes(t *testing.T) {
	own, _ := key.ParsePublic("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE=")
	router, _ := key.ParsePublic("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAI=")
	nm := &mgmtpb.NetworkMap{Routes: []*mgmtpb.Route{
		{ID: "r1", NetID: "office", Network: "10.1.2.0/16", NetworkType: 1, Peer: router.String(), Metric: 100, Masquerade: true},
		{ID: "r2", NetID: "v6", Network: "2001:db8::/32", NetworkType: 2, Peer: router.String(), Metric: 9999},
		{ID: "r3", NetID: "web", Network: "192.0.2.0/32", NetworkType: 3, Domains: []string{"example.com", "*.example.org"}, Peer: router.String(), KeepRoute: true},
		{ID: "r4", NetID: "exit", Network: "0.0.0.0/0", NetworkType: 1, Peer: router.String(), SkipAutoApply: true},
		{ID: "r5", NetID: "mine", Network: "10.5.0.0/16", NetworkType: 1, Peer: own.String()},
		{ID: "r6", NetID: "mine", Network: "10.5.0.0/16", NetworkType: 1, Peer: router.String()},
		{ID: "r7", NetID: "bad", Network: "nonsense", NetworkType: 1, Peer: router.String()},
		{ID: "r8", NetID: "badpeer", Network: "10.8.0.0/16", NetworkType: 1, Peer: "x"},
		{ID: "r9", NetID: "old", Network: "10.9.0.0/16", Peer: router.String()}, // no type: an older server
	}}
	got := clientRoutes(nm, own)
	byID := map[string]int{}
	for i, r := range got {
		byID[r.ID] = i
	}
	for _, id := range []string{"r5", "r6", "r7", "r8"} {
		if _, ok := byID[id]; ok {
			t.Errorf("route %s should not be a client route", id)
		}
	}
	if len(got) != 5 {
		t.Fatalf("got %d client routes, want 5: %+v", len(got), got)
	}
	r1 := got[byID["r1"]]
	if r1.Prefix != netip.MustParsePrefix("10.1.0.0/16") || r1.Peer != router || r1.Metric != 100 || !r1.Masquerade || r1.NetID != "office" {
		t.Errorf("r1 = %+v", r1)
	}
	if r := got[byID["r2"]]; r.Prefix != netip.MustParsePrefix("2001:db8::/32") {
		t.Errorf("r2 = %+v", r)
	}
	if r := got[byID["r3"]]; !r.IsDomain() || len(r.Domains) != 2 || !r.KeepRoute {
		t.Errorf("r3 = %+v", r)
	}
	if r := got[byID["r4"]]; !r.IsExitNode() || !r.SkipAutoApply {
		t.Errorf("r4 = %+v", r)
	}
	if r := got[byID["r9"]]; r.Prefix != netip.MustParsePrefix("10.9.0.0/16") {
		t.Errorf("r9 = %+v", r)
	}
}

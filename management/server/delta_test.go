package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Streams that ask for network map deltas get, for a peer joining or
// leaving, a delta whose size does not depend on the account's size, and
// the maps they rebuild from deltas equal what a full Sync gives, under
// the default policy and under port rules; a policy change sends a whole
// map. Streams that did not ask (the official clients) get whole maps.
func TestMapDeltas(t *testing.T) { engines.Each(t, testMapDeltas) }

func testMapDeltas(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))["key"].(string)
	join := func(name string, deltas bool) *testpeer.Peer {
		t.Helper()
		p := testpeer.New(e.conn, name)
		p.Deltas = deltas
		if _, err := p.Login(ctx, key); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sync := func(p *testpeer.Peer) *testpeer.Stream {
		t.Helper()
		s, err := p.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	a, b := join("a", true), join("b", false)
	sa, sb := sync(a), sync(b)
	// a asked to build its peer DNS records itself: its whole maps carry
	// none (b's do), and the map it rebuilds has them.
	for _, st := range []*testpeer.Stream{sa, sb} {
		if err := st.WaitFor(5*time.Second, func(rs []*mgmtpb.SyncResponse) bool { return len(rs) > 0 }); err != nil {
			t.Fatal(err)
		}
	}
	if z := sa.Raw()[0].GetNetworkMap().GetDNSConfig().GetCustomZones(); len(z) != 1 || !z[0].GetWiremeshDerivedRecords() || len(z[0].GetRecords()) != 0 {
		t.Fatalf("a's whole map zone: %v", z)
	}
	if z := sb.Raw()[0].GetNetworkMap().GetDNSConfig().GetCustomZones(); len(z) != 1 || z[0].GetWiremeshDerivedRecords() || len(z[0].GetRecords()) != 2 {
		t.Fatalf("b's whole map zone: %v", z)
	}
	if z := sa.LatestMap().GetDNSConfig().GetCustomZones(); len(z[0].GetRecords()) != 2 || z[0].GetWiremeshDerivedRecords() {
		t.Fatalf("a's rebuilt zone: %v", z)
	}
	// a (asked for deltas) gets an empty response behind its first map,
	// by which the server learns that it was read.
	if err := sa.WaitFor(5*time.Second, func(rs []*mgmtpb.SyncResponse) bool { return len(rs) >= 2 }); err != nil {
		t.Fatal("no response after a's first map")
	}
	if r := sa.Raw()[1]; r.GetNetworkMap() != nil || r.GetWiremeshDelta() != nil || r.GetNetbirdConfig() != nil {
		t.Fatalf("a's second response: %v, want an empty one", r)
	}

	// lastRaw waits for the stream's map to reach serial and returns the
	// last response as received.
	waitSerial := func(s *testpeer.Stream, serial uint64) *mgmtpb.SyncResponse {
		t.Helper()
		if err := s.WaitFor(5*time.Second, func([]*mgmtpb.SyncResponse) bool { return s.LatestMap().GetSerial() >= serial }); err != nil {
			t.Fatalf("map did not reach serial %d: %v", serial, err)
		}
		raw := s.Raw()
		return raw[len(raw)-1]
	}
	// same checks a's rebuilt map against a full Sync of a.
	same := func(s *testpeer.Stream) *testpeer.Stream {
		t.Helper()
		got := s.LatestMap()
		full := testpeer.WithKey(e.conn, "a", a.Priv)
		fs := sync(full)
		want := fs.LatestMap()
		fs.Close()
		// The full map may carry a later serial: a change that leaves a's
		// map as it was (another peer's metadata, say) sends it nothing.
		if got.GetSerial() > want.GetSerial() || !sameSet(got.GetRemotePeers(), want.GetRemotePeers()) || !sameSet(got.GetFirewallRules(), want.GetFirewallRules()) ||
			got.GetFirewallRulesIsEmpty() != want.GetFirewallRulesIsEmpty() || got.GetRemotePeersIsEmpty() != want.GetRemotePeersIsEmpty() ||
			!want.GetDNSConfig().GetServiceEnable() || !proto.Equal(got.GetDNSConfig(), want.GetDNSConfig()) {
			t.Fatalf("map rebuilt from deltas differs from a full one:\n got %v\nwant %v", got, want)
		}
		s.Close()
		return sync(a) // the full Sync replaced the delta stream: open it again
	}
	serialOf := func(s *testpeer.Stream) uint64 { return s.LatestMap().GetSerial() }

	// Joins under the default All-to-All policy: deltas of constant size.
	var sizes []int
	for i := range 20 {
		before := serialOf(sa)
		p := join(fmt.Sprintf("j%d", i), false)
		r := waitSerial(sa, before+1)
		d := r.GetWiremeshDelta()
		if r.GetNetworkMap() != nil || d == nil || len(d.GetUpsertPeers()) != 1 || d.GetUpsertPeers()[0].GetWgPubKey() != p.Public().String() {
			t.Fatalf("join %d: a got %v, want a delta adding the peer", i, r)
		}
		sizes = append(sizes, proto.Size(r))
		if rb := waitSerial(sb, before+1); rb.GetNetworkMap() == nil || rb.GetWiremeshDelta() != nil {
			t.Fatalf("a client that did not ask got %v", rb)
		}
	}
	if slices.Max(sizes) > slices.Min(sizes)+16 {
		t.Fatalf("delta sizes grow with the account: %v", sizes)
	}
	t.Logf("join delta: %d bytes; b's full map at 22 peers: %d bytes", sizes[len(sizes)-1], proto.Size(sb.Raw()[len(sb.Raw())-1]))
	sa = same(sa)

	// A peer leaves: a delta removing it.
	ids := map[string]string{}
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		ids[obj(p)["name"].(string)] = obj(p)["id"].(string)
	}
	before := serialOf(sa)
	o.call("DELETE", "/api/peers/"+ids["j0"], nil, 200)
	if d := waitSerial(sa, before+1).GetWiremeshDelta(); d == nil || len(d.GetRemovedPeers()) != 1 {
		t.Fatalf("leave: %v", d)
	}
	sa = same(sa)

	// A rename: a delta with the peer's new name, which the peer's DNS
	// zone follows.
	before = serialOf(sa)
	o.call("PUT", "/api/peers/"+ids["j1"], map[string]any{"name": "renamed", "ssh_enabled": false, "login_expiration_enabled": false}, 200)
	if d := waitSerial(sa, before+1).GetWiremeshDelta(); d == nil || len(d.GetUpsertPeers()) != 1 {
		t.Fatalf("rename: %v", d)
	}
	if !slices.ContainsFunc(sa.LatestMap().GetDNSConfig().GetCustomZones()[0].GetRecords(), func(r *mgmtpb.SimpleRecord) bool { return strings.HasPrefix(r.GetName(), "renamed.") }) {
		t.Fatalf("renamed peer not in the zone: %v", sa.LatestMap().GetDNSConfig())
	}
	sa = same(sa)

	// Port rules: default off, tcp/22 from group src (a) to dst (b). A
	// policy change is not peer-local: a whole map.
	src := obj(o.call("POST", "/api/groups", map[string]any{"name": "src", "peers": []string{ids["a"]}}, 200))
	dst := obj(o.call("POST", "/api/groups", map[string]any{"name": "dst", "peers": []string{ids["b"]}}, 200))
	for _, p := range list(o.call("GET", "/api/policies", nil, 200)) {
		o.call("DELETE", "/api/policies/"+obj(p)["id"].(string), nil, 200)
	}
	before = serialOf(sa)
	o.call("POST", "/api/policies", map[string]any{"name": "ssh", "enabled": true, "rules": []any{map[string]any{
		"name": "ssh", "enabled": true, "action": "accept", "bidirectional": false, "protocol": "tcp", "ports": []string{"22", "2222"},
		"sources": []string{src["id"].(string)}, "destinations": []string{dst["id"].(string)}}}}, 200)
	if err := sa.WaitFor(5*time.Second, func([]*mgmtpb.SyncResponse) bool {
		return serialOf(sa) > before && testpeer.HasPeers(sa.LatestMap(), b.Public())
	}); err != nil {
		t.Fatalf("policy change: %v", sa.LatestMap())
	}
	sa = same(sa)

	// A new peer joins dst through a setup key with that auto-group: a
	// gets a delta adding it with its rules.
	dkey := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "d", "type": "reusable", "expires_in": 86400, "auto_groups": []string{dst["id"].(string)}, "usage_limit": 0}, 200))["key"].(string)
	c := testpeer.New(e.conn, "c")
	if _, err := c.Login(ctx, dkey); err != nil {
		t.Fatal(err)
	}
	if err := sa.WaitFor(5*time.Second, func([]*mgmtpb.SyncResponse) bool { return testpeer.HasPeers(sa.LatestMap(), b.Public(), c.Public()) }); err != nil {
		t.Fatalf("c not in a's map: %v", sa.LatestMap())
	}
	raw := sa.Raw()
	d := raw[len(raw)-1].GetWiremeshDelta()
	if d == nil || len(d.GetUpsertPeers()) != 1 || len(d.GetAddRules()) != 2 {
		t.Fatalf("join into a port policy: %v, want a delta with the peer and its 2 rules", raw[len(raw)-1])
	}
	sa = same(sa)
	// ... and leaves: its rules go too.
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		if obj(p)["name"] == "c" {
			o.call("DELETE", "/api/peers/"+obj(p)["id"].(string), nil, 200)
		}
	}
	if err := sa.WaitFor(5*time.Second, func([]*mgmtpb.SyncResponse) bool { return testpeer.HasPeers(sa.LatestMap(), b.Public()) }); err != nil {
		t.Fatal("c still in a's map")
	}
	raw = sa.Raw()
	if d := raw[len(raw)-1].GetWiremeshDelta(); d == nil || len(d.GetRemoveRules()) != 2 || len(d.GetRemovedPeers()) != 1 {
		t.Fatalf("leave from a port policy: %v", raw[len(raw)-1])
	}
	same(sa)
}

// sameSet compares two lists of messages as multisets.
func sameSet[M proto.Message](a, b []M) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
	for _, x := range a {
		found := false
		for j, y := range b {
			if !used[j] && proto.Equal(x, y) {
				used[j], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// ownerAPI sets up a server with the built-in provider and returns a
// client authenticated with the owner's personal access token.
func ownerAPI(t *testing.T, eng storetest.Engine) (*env, api) {
	t.Helper()
	e := startOn(t, eng, server.Options{Identity: server.Identity{BuiltInIssuer: autoIssuer}})
	setup := obj(e.api("").call("POST", "/api/setup", map[string]any{"email": "o@example.com", "password": "Owner-passw0rd!", "name": "O", "create_pat": true}, 200))
	return e, e.api("Token " + setup["personal_access_token"].(string))
}

// TestAccessREST manages setup keys, groups, policies and posture checks
// through the REST API and checks what the peers' maps then hold.
func TestAccessREST(t *testing.T) { engines.Each(t, testAccessREST) }

func testAccessREST(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ctx := context.Background()

	// A setup key made through the API registers two peers.
	o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "sometimes", "expires_in": 0, "auto_groups": []string{}, "usage_limit": 0}, 422)
	key := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))
	if key["state"] != "valid" || len(key["key"].(string)) != 36 {
		t.Fatalf("setup key %v", key)
	}
	if listed := obj(list(o.call("GET", "/api/setup-keys", nil, 200))[0]); listed["key"] == key["key"] || listed["key"].(string)[5:] != "****" {
		t.Fatalf("listed key is not masked: %v", listed["key"])
	}
	a, b := testpeer.New(e.conn, "a"), testpeer.New(e.conn, "b")
	for _, p := range []*testpeer.Peer{a, b} {
		if _, err := p.Login(ctx, key["key"].(string)); err != nil {
			t.Fatal(err)
		}
	}
	ids := map[string]string{}
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		ids[obj(p)["name"].(string)] = obj(p)["id"].(string)
	}

	// Groups and a one-way tcp/22 policy from a to b, the default off.
	src := obj(o.call("POST", "/api/groups", map[string]any{"name": "src", "peers": []string{ids["a"]}}, 200))
	dst := obj(o.call("POST", "/api/groups", map[string]any{"name": "dst", "peers": []string{ids["b"]}}, 200))
	o.call("POST", "/api/groups", map[string]any{"name": "src"}, 409)
	o.call("POST", "/api/groups", map[string]any{"name": "ghost", "peers": []string{"no-such-peer"}}, 422)
	if g := obj(o.call("GET", "/api/groups/"+src["id"].(string), nil, 200)); g["peers_count"] != float64(1) || obj(list(g["peers"])[0])["name"] != "a" {
		t.Fatalf("group %v", g)
	}
	var all, def string
	for _, g := range list(o.call("GET", "/api/groups", nil, 200)) {
		if obj(g)["name"] == "All" {
			all = obj(g)["id"].(string)
		}
	}
	o.call("DELETE", "/api/groups/"+all, nil, 422)
	o.call("PUT", "/api/groups/"+all, map[string]any{"name": "All", "peers": []string{}}, 422)
	for _, p := range list(o.call("GET", "/api/policies", nil, 200)) {
		def = obj(p)["id"].(string)
	}
	o.call("DELETE", "/api/policies/"+def, nil, 200)
	rule := func(extra map[string]any) map[string]any {
		r := map[string]any{"name": "ssh", "enabled": true, "action": "accept", "bidirectional": false, "protocol": "tcp", "ports": []string{"22"},
			"sources": []string{src["id"].(string)}, "destinations": []string{dst["id"].(string)}}
		for k, v := range extra {
			r[k] = v
		}
		return r
	}
	for name, bad := range map[string]map[string]any{
		"ports with all":   rule(map[string]any{"protocol": "all"}),
		"ports and ranges": rule(map[string]any{"port_ranges": []map[string]int{{"start": 1, "end": 2}}}),
		"port 0":           rule(map[string]any{"ports": []string{"0"}}),
		"port text":        rule(map[string]any{"ports": []string{"ssh"}}),
		"unknown group":    rule(map[string]any{"sources": []string{"nope"}}),
		"unknown protocol": rule(map[string]any{"protocol": "sctp"}),
		"no sources":       rule(map[string]any{"sources": []string{}}),
	} {
		t.Run(name, func(t *testing.T) {
			o.call("POST", "/api/policies", map[string]any{"name": "p", "enabled": true, "rules": []any{bad}}, 422)
		})
	}
	pol := obj(o.call("POST", "/api/policies", map[string]any{"name": "ssh", "enabled": true, "rules": []any{rule(nil)}}, 200))
	r0 := obj(list(pol["rules"])[0])
	if obj(list(r0["sources"])[0])["name"] != "src" || list(r0["ports"])[0] != "22" {
		t.Fatalf("policy %v", pol)
	}
	o.call("DELETE", "/api/groups/"+src["id"].(string), nil, 412)

	sa, err := a.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	sb, err := b.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	has := func(s *testpeer.Stream, want ...*testpeer.Peer) {
		t.Helper()
		var keys []keyT
		for _, p := range want {
			keys = append(keys, p.Public())
		}
		if err := s.WaitFor(5*time.Second, func([]*mgmtpb.SyncResponse) bool { return testpeer.HasPeers(s.LatestMap(), keys...) }); err != nil {
			t.Fatalf("map %v, want peers %v", s.LatestMap().GetRemotePeers(), keys)
		}
	}
	has(sb, a)
	has(sa, b)

	// A posture check the source fails takes the policy away from it.
	o.call("POST", "/api/posture-checks", map[string]any{"name": "geo", "description": "", "checks": map[string]any{
		"geo_location_check": map[string]any{"locations": []map[string]string{{"country_code": "DE"}}, "action": "allow"}}}, 422)
	o.call("POST", "/api/posture-checks", map[string]any{"name": "empty", "description": "", "checks": map[string]any{}}, 422)
	pc := obj(o.call("POST", "/api/posture-checks", map[string]any{"name": "new agents", "description": "", "checks": map[string]any{
		"nb_version_check": map[string]any{"min_version": "99.0.0"}}}, 200))
	withCheck := map[string]any{"name": "ssh", "enabled": true, "source_posture_checks": []string{pc["id"].(string)}, "rules": []any{rule(nil)}}
	o.call("PUT", "/api/policies/"+pol["id"].(string), withCheck, 200)
	has(sb)
	has(sa)
	o.call("DELETE", "/api/posture-checks/"+pc["id"].(string), nil, 412)
	o.call("PUT", "/api/posture-checks/"+pc["id"].(string), map[string]any{"name": "new agents", "description": "", "checks": map[string]any{
		"nb_version_check": map[string]any{"min_version": "0.50"}}}, 200)
	has(sb, a)

	// A process check: the source is asked about the process, and counts
	// only once it reports it running.
	o.call("PUT", "/api/posture-checks/"+pc["id"].(string), map[string]any{"name": "new agents", "description": "", "checks": map[string]any{
		"process_check": map[string]any{"processes": []map[string]string{{"linux_path": "/opt/edr/agent"}}}}}, 200)
	has(sb)
	if err := sa.WaitFor(5*time.Second, func([]*mgmtpb.SyncResponse) bool {
		cs := sa.Messages()[len(sa.Messages())-1].GetChecks()
		return len(cs) == 1 && len(cs[0].GetFiles()) == 1 && cs[0].GetFiles()[0] == "/opt/edr/agent"
	}); err != nil {
		t.Fatal("the source was not asked about the process")
	}
	if err := a.SyncMeta(ctx, &mgmtpb.File{Path: "/opt/edr/agent", Exist: true, ProcessIsRunning: true}); err != nil {
		t.Fatal(err)
	}
	has(sb, a)
	if err := a.SyncMeta(ctx, &mgmtpb.File{Path: "/opt/edr/agent", Exist: true}); err != nil {
		t.Fatal(err)
	}
	has(sb)

	// A rule between two single peers (resources of type peer).
	peerRule := map[string]any{"name": "pair", "enabled": true, "action": "accept", "bidirectional": true, "protocol": "all",
		"sourceResource": map[string]string{"id": ids["a"], "type": "peer"}, "destinationResource": map[string]string{"id": ids["b"], "type": "peer"}}
	bad := map[string]any{"name": "pair", "enabled": true, "action": "accept", "bidirectional": true, "protocol": "all",
		"sourceResource": map[string]string{"id": "x", "type": "host"}, "destinations": []string{dst["id"].(string)}}
	o.call("POST", "/api/policies", map[string]any{"name": "net", "enabled": true, "rules": []any{bad}}, 422)
	both := map[string]any{"name": "pair", "enabled": true, "action": "accept", "bidirectional": true, "protocol": "all",
		"sources": []string{}, "sourceResource": map[string]string{"id": ids["a"], "type": "peer"}, "destinations": []string{dst["id"].(string)}}
	o.call("POST", "/api/policies", map[string]any{"name": "both", "enabled": true, "rules": []any{both}}, 422)
	pp := obj(o.call("POST", "/api/policies", map[string]any{"name": "pair", "enabled": true, "rules": []any{peerRule}}, 200))
	if rr := obj(list(pp["rules"])[0]); obj(rr["sourceResource"])["id"] != ids["a"] || rr["sources"] != nil {
		t.Fatalf("peer rule %v", rr)
	}
	has(sb, a)
	has(sa, b)
	o.call("DELETE", "/api/policies/"+pp["id"].(string), nil, 200)
	has(sb)

	// Revoking the setup key through the API stops new registrations.
	o.call("PUT", "/api/setup-keys/"+key["id"].(string), map[string]any{"revoked": true}, 422)
	if k := obj(o.call("PUT", "/api/setup-keys/"+key["id"].(string), map[string]any{"revoked": true, "auto_groups": []string{}}, 200)); k["state"] != "revoked" {
		t.Fatalf("revoked key %v", k)
	}
	if _, err := testpeer.New(e.conn, "c").Login(ctx, key["key"].(string)); err == nil {
		t.Fatal("a revoked key registered a peer")
	}
}

type keyT = key.Public

// TestOpenStreamsNotCapped: the Sync limit bounds streams being set up,
// not connected peers: more streams than the limit stay open together.
func TestOpenStreamsNotCapped(t *testing.T) {
	e := startWith(t, t.TempDir(), server.Options{MaxSyncs: 2})
	_, secret := e.setupKey(setupkeyReusable())
	ctx := context.Background()
	for i := range 5 {
		p := testpeer.New(e.conn, "p")
		if _, err := p.Login(ctx, secret); err != nil {
			t.Fatal(err)
		}
		st, err := p.Sync(ctx)
		if err != nil {
			t.Fatalf("stream %d beyond a setup limit of 2: %v", i+1, err)
		}
		defer st.Close()
	}
}

// TestFanoutMetric: a change that sends new maps is measured from the
// change to each stream's send.
func TestFanoutMetric(t *testing.T) {
	e := startWith(t, t.TempDir(), server.Options{})
	_, secret := e.setupKey(setupkeyReusable())
	ctx := context.Background()
	var streams []*testpeer.Stream
	for range 3 {
		p := testpeer.New(e.conn, "p")
		if _, err := p.Login(ctx, secret); err != nil {
			t.Fatal(err)
		}
		st, err := p.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		streams = append(streams, st)
	}
	joiner := testpeer.New(e.conn, "joiner")
	if _, err := joiner.Login(ctx, secret); err != nil {
		t.Fatal(err)
	}
	for _, st := range streams {
		if err := st.WaitFor(5*time.Second, func([]*mgmtpb.SyncResponse) bool {
			for _, rp := range st.LatestMap().GetRemotePeers() {
				if rp.GetWgPubKey() == joiner.Public().String() {
					return true
				}
			}
			return false
		}); err != nil {
			t.Fatal(err)
		}
	}
	// The server counts a map after its send returned, which can be just
	// after the client has it.
	got := map[string]float64{}
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		for _, s := range e.srv.API.Metrics() {
			got[s.Name] = s.Value
		}
		if got["management_fanout_seconds_count"] >= 3 || time.Now().After(deadline) {
			break
		}
	}
	// The join reached all three streams; earlier registrations reached
	// the streams open then.
	if got["management_fanout_seconds_count"] < 3 || got["management_fanout_seconds_sum"] <= 0 || got["management_fanout_seconds_max"] <= 0 ||
		got["management_fanout_seconds_max"] > 5 {
		t.Fatalf("fan-out metrics %v", got)
	}
	// The registrations and stream openings went through the store.
	if got["management_store_transactions_total"] < 4 || got["management_store_transaction_seconds_total"] <= 0 ||
		got["management_store_reads_total"] < 1 || got["management_store_read_seconds_total"] <= 0 {
		t.Fatalf("store metrics %v", got)
	}
}

// TestStuckClientsDoNotStallFanout: streams whose clients never read fill
// their flow-control windows and block in Send; changes must still reach
// everyone else (building maps is bounded, sending is not).
func TestStuckClientsDoNotStallFanout(t *testing.T) {
	e := startWith(t, t.TempDir(), server.Options{})
	_, secret := e.setupKey(setupkeyReusable())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 12 {
		p := testpeer.New(e.conn, fmt.Sprint("stuck-", i))
		if _, err := p.Login(ctx, secret); err != nil {
			t.Fatal(err)
		}
		if err := p.StuckSync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	reader := testpeer.New(e.conn, "reader")
	if _, err := reader.Login(ctx, secret); err != nil {
		t.Fatal(err)
	}
	st, err := reader.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Each join sends every stuck stream a bigger map, until their windows
	// are full and their sends block.
	var last *testpeer.Peer
	for i := range 60 {
		last = testpeer.New(e.conn, fmt.Sprint("joiner-with-a-long-hostname-to-grow-the-maps-", i))
		if _, err := last.Login(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.WaitFor(10*time.Second, func([]*mgmtpb.SyncResponse) bool {
		for _, rp := range st.LatestMap().GetRemotePeers() {
			if rp.GetWgPubKey() == last.Public().String() {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatal("the reading peer stopped getting maps while other clients were stuck")
	}
}

package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/peerconns"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestConnectionReportsREST: what our agents report of their connections
// (SyncMeta, wiremeshConnections) is on GET /api/peers and
// /api/peers/{id}; the report is hostile input (only keys of the account's
// other peers count, at most 4,096 entries are read) and lives only while
// the reporter's Sync stream does.
func TestConnectionReportsREST(t *testing.T) { engines.Each(t, testConnectionReportsREST) }

func testConnectionReportsREST(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ctx := context.Background()
	sk := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))
	a, b, c := testpeer.New(e.conn, "a"), testpeer.New(e.conn, "b"), testpeer.New(e.conn, "c")
	for _, p := range []*testpeer.Peer{a, b, c} {
		if _, err := p.Login(ctx, sk["key"].(string)); err != nil {
			t.Fatal(err)
		}
	}
	ids := map[string]string{}
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		ids[obj(p)["name"].(string)] = obj(p)["id"].(string)
	}
	conn := func(p *testpeer.Peer, typ mgmtpb.WiremeshConnection_Type) *mgmtpb.WiremeshConnection {
		return &mgmtpb.WiremeshConnection{WgPubKey: p.Public().String(), Type: typ}
	}
	foreign := func() *mgmtpb.WiremeshConnection {
		k, _ := key.NewPrivate()
		return &mgmtpb.WiremeshConnection{WgPubKey: k.Public().String(), Type: mgmtpb.WiremeshConnection_P2P}
	}
	connectionsOfA := func() any {
		for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
			if obj(p)["name"] == "a" {
				return obj(p)["connections"]
			}
		}
		t.Fatal("peer a not listed")
		return nil
	}

	// No stream open: the report is dropped.
	if err := a.ReportConns(ctx, conn(b, mgmtpb.WiremeshConnection_P2P)); err != nil {
		t.Fatal(err)
	}
	if got := connectionsOfA(); got != nil {
		t.Fatalf("a report without a Sync stream is shown: %v", got)
	}
	st, err := a.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.WaitFor(5*time.Second, func(m []*mgmtpb.SyncResponse) bool { return len(m) > 0 }); err != nil {
		t.Fatal(err)
	}

	// Keys of no peer of the account, the reporter itself, a repeated
	// peer, a bad key and an unknown type are ignored.
	if err := a.ReportConns(ctx, conn(b, mgmtpb.WiremeshConnection_P2P), conn(c, mgmtpb.WiremeshConnection_RELAYED), foreign(),
		conn(a, mgmtpb.WiremeshConnection_P2P), conn(b, mgmtpb.WiremeshConnection_RELAYED),
		&mgmtpb.WiremeshConnection{WgPubKey: "not a key", Type: mgmtpb.WiremeshConnection_P2P},
		&mgmtpb.WiremeshConnection{WgPubKey: c.Public().String(), Type: 42}); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"p2p": 1.0, "relayed": 1.0, "connecting": 0.0}
	if got := connectionsOfA(); !equalJSON(got, want) {
		t.Fatalf("connections = %v, want %v", got, want)
	}
	one := obj(o.call("GET", "/api/peers/"+ids["a"], nil, 200))
	if !equalJSON(one["connections"], want) {
		t.Fatalf("GET /api/peers/{id} connections = %v, want %v", one["connections"], want)
	}
	types := map[string]string{}
	for _, x := range list(one["peer_connections"]) {
		types[obj(x)["peer_id"].(string)] = obj(x)["type"].(string)
	}
	if len(types) != 2 || types[ids["b"]] != "p2p" || types[ids["c"]] != "relayed" {
		t.Fatalf("peer_connections = %v, want b p2p and c relayed", one["peer_connections"])
	}
	// PUT /api/peers/{id} answers with the peer as GET shows it.
	put := obj(o.call("PUT", "/api/peers/"+ids["a"], map[string]any{"name": "a", "ssh_enabled": false, "login_expiration_enabled": false}, 200))
	if !equalJSON(put["connections"], want) || len(list(put["peer_connections"])) != 2 {
		t.Fatalf("PUT /api/peers/{id} connections = %v %v, want %v and two peers", put["connections"], put["peer_connections"], want)
	}
	// Peers that report nothing show nothing (official clients).
	if b := obj(o.call("GET", "/api/peers/"+ids["b"], nil, 200)); b["connections"] != nil || b["peer_connections"] != nil {
		t.Fatalf("peer b reported nothing but shows %v %v", b["connections"], b["peer_connections"])
	}

	// Too many entries: only the first 4,096 are read (all foreign here),
	// so the real one after them does not count. (Reports closer than
	// peerconns.MinInterval are dropped: wait it out.)
	many := make([]*mgmtpb.WiremeshConnection, 0, 4097)
	for range 4096 {
		many = append(many, foreign())
	}
	many = append(many, conn(b, mgmtpb.WiremeshConnection_CONNECTING))
	time.Sleep(peerconns.MinInterval)
	if err := a.ReportConns(ctx, many...); err != nil {
		t.Fatal(err)
	}
	if got, want := connectionsOfA(), map[string]any{"p2p": 0.0, "relayed": 0.0, "connecting": 0.0}; !equalJSON(got, want) {
		t.Fatalf("after an oversized report connections = %v, want %v", got, want)
	}

	// The stream ends (the peer is offline): its report goes with it.
	time.Sleep(peerconns.MinInterval)
	if err := a.ReportConns(ctx, conn(b, mgmtpb.WiremeshConnection_P2P)); err != nil {
		t.Fatal(err)
	}
	st.Close()
	deadline := time.Now().Add(5 * time.Second)
	for connectionsOfA() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the report outlived the Sync stream: %v", connectionsOfA())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func equalJSON(got any, want map[string]any) bool {
	m, ok := got.(map[string]any)
	if !ok || len(m) != len(want) {
		return false
	}
	for k, v := range want {
		if m[k] != v {
			return false
		}
	}
	return true
}

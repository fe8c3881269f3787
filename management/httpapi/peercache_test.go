package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/access"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/httpapi"
	"github.com/wiremesh/wiremesh/management/peerconns"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/updates"
	"github.com/wiremesh/wiremesh/management/users"
)

// instance is one management instance's REST API over its own store
// handle (its own connection pool) on a shared database.
type instance struct {
	st    *store.Store
	peers *peers.Service
	url   string
}

func newInstance(t *testing.T, cfg store.Config, conns *peerconns.Tracker) *instance {
	t.Helper()
	st, err := store.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	hub := updates.NewHub()
	ps := peers.New(st, hub, nil, nil)
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Store: st, Users: users.New(users.Options{Store: st, Notify: hub, LocalIdP: true}),
		Peers: ps, Access: access.New(st, hub, nil), Conns: conns}))
	t.Cleanup(srv.Close)
	return &instance{st: st, peers: ps, url: srv.URL}
}

// raw GETs path with the token and returns the body as served.
func (in *instance) raw(t *testing.T, token, path string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, in.url+path, nil)
	req.Header.Set("Authorization", "Token "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// TestPeerViewsCached: the peer list, a single peer, groups and policies
// as two long-running instances on one database serve them (with their
// caches warm) are byte for byte what a fresh instance (caches empty)
// serves, after every kind of change: a metadata report and a connection
// (neither bumps the network serial), a rename, group membership, a
// policy, approval, a deletion and the account's login expiration. On
// Postgres the instances have their own connection pools, as separate
// processes do.
func TestPeerViewsCached(t *testing.T) { engines.Each(t, testPeerViewsCached) }

func testPeerViewsCached(t *testing.T, eng storetest.Engine) {
	ctx := context.Background()
	cfg := eng.Config(t)
	// The instances share the connection reports (a test stand-in for
	// the agents reporting to each), so a fresh one shows them too.
	conns := peerconns.New()
	a, b := newInstance(t, cfg, conns), newInstance(t, cfg, conns)
	setup := obj(client{t: t, base: a.url, auth: ""}.call("POST", "/api/setup", map[string]any{"email": "owner@example.com", "password": ownerPassword, "name": "Owner", "create_pat": true}, 200))
	token := setup["personal_access_token"].(string)
	owner := client{t: t, base: a.url, auth: "Token " + token}
	accID := account.ID(obj(list(owner.call("GET", "/api/accounts", nil, 200))[0])["id"].(string))

	// Three peers registered with a setup key, one added by the owner.
	sk, secret, err := setupkey.New(accID, setupkey.Options{Name: "k", Reusable: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.st.Tx(ctx, func(tx *store.Tx) error { return tx.In(accID).InsertSetupKey(ctx, sk) }); err != nil {
		t.Fatal(err)
	}
	var keys []key.Public
	var ids []string
	for i := range 3 {
		priv, _ := key.NewPrivate()
		in := peers.LoginInput{Key: priv.Public(), SetupKey: secret, Meta: account.Meta{Hostname: fmt.Sprintf("host-%d", i), OS: "Debian <GNU>/Linux", OSVersion: "12", NetbirdVersion: "0.77.1"}}
		p, _, err := a.peers.Login(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		keys, ids = append(keys, priv.Public()), append(ids, string(p.ID))
	}
	// The owner's peer logged in (SSO) two days ago.
	var ownerUser account.User
	if err := a.st.Read(ctx, func(tx *store.Tx) error {
		var err error
		ownerUser, err = tx.In(accID).User(ctx, account.UserID(setup["user_id"].(string)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-48 * time.Hour)
	priv, _ := key.NewPrivate()
	p, _, err := peers.New(a.st, updates.NewHub(), nil, func() time.Time { return past }).Login(ctx,
		peers.LoginInput{Key: priv.Public(), User: &ownerUser, Meta: account.Meta{Hostname: "laptop", OS: "macOS", NetbirdVersion: "0.77.1"}})
	if err != nil {
		t.Fatal(err)
	}
	keys, ids = append(keys, priv.Public()), append(ids, string(p.ID))

	paths := func() []string {
		return []string{"/api/peers", "/api/peers?name=host-1", "/api/peers/" + ids[0], "/api/peers/" + ids[0] + "/accessible-peers", "/api/groups", "/api/policies", "/api/events"}
	}
	check := func(step string) {
		t.Helper()
		fresh := newInstance(t, cfg, conns)
		for _, path := range paths() {
			want := fresh.raw(t, token, path)
			for name, in := range map[string]*instance{"a": a, "b": b} {
				if got := in.raw(t, token, path); got != want {
					t.Errorf("%s: GET %s on instance %s differs from a fresh instance's (-fresh +%s):\n%s", step, path, name, name, cmp.Diff(want, got))
				}
			}
		}
	}
	check("registered")
	check("unchanged") // served from the caches

	// A metadata report posture checks do not read changes no map, so no
	// serial: the list shows it.
	meta := account.Meta{Hostname: "host-0", OS: "Ubuntu & friends", OSVersion: "12", NetbirdVersion: "0.77.1", UIVersion: "0.77.1", SerialNumber: "SN-1"}
	if err := b.peers.UpdateMeta(ctx, keys[0], meta); err != nil {
		t.Fatal(err)
	}
	check("metadata")
	if !strings.Contains(a.raw(t, token, "/api/peers/"+ids[0]), `"serial_number":"SN-1"`) {
		t.Fatal("the new metadata is not shown")
	}

	// Connections change neither serial nor view revision.
	if err := b.peers.SetConnected(ctx, accID, account.PeerID(ids[1]), true); err != nil {
		t.Fatal(err)
	}
	check("connected")
	if !strings.Contains(a.raw(t, token, "/api/peers?name=host-1"), `"connected":true`) {
		t.Fatal("the connection is not shown")
	}

	// A connection report (live state: neither serial nor view revision)
	// is in the next answer, changed or gone.
	slot := conns.Open(accID, account.PeerID(ids[0]))
	for _, tc := range []struct {
		report []peerconns.Conn
		list   string
		peer   []string // its peer_connections entries (in peer ID order)
	}{
		{[]peerconns.Conn{{Peer: account.PeerID(ids[1]), Type: peerconns.P2P}, {Peer: account.PeerID(ids[2]), Type: peerconns.Relayed, Latency: 1500 * time.Microsecond}},
			`"connections":{"p2p":1,"relayed":1,"connecting":0}`,
			[]string{`{"peer_id":"` + ids[1] + `","type":"p2p"}`, `{"peer_id":"` + ids[2] + `","type":"relayed","latency_ms":1.5}`}},
		{[]peerconns.Conn{{Peer: account.PeerID(ids[1]), Type: peerconns.Relayed}, {Peer: account.PeerID(ids[2]), Type: peerconns.Connecting}},
			`"connections":{"p2p":0,"relayed":1,"connecting":1}`,
			[]string{`{"peer_id":"` + ids[1] + `","type":"relayed"}`, `{"peer_id":"` + ids[2] + `","type":"connecting"}`}},
	} {
		if !conns.Report(accID, account.PeerID(ids[0]), tc.report) {
			t.Fatal("report refused with the stream open")
		}
		check("connection report")
		if got := a.raw(t, token, "/api/peers"); !strings.Contains(got, tc.list) {
			t.Fatalf("the list does not show the report %s:\n%s", tc.list, got)
		}
		if ids[1] > ids[2] {
			tc.peer[0], tc.peer[1] = tc.peer[1], tc.peer[0]
		}
		want := tc.list + `,"peer_connections":[` + strings.Join(tc.peer, ",") + "]}"
		if got := a.raw(t, token, "/api/peers/"+ids[0]); !strings.Contains(got, want) {
			t.Fatalf("the peer does not show the report %s:\n%s", want, got)
		}
	}
	conns.Close(accID, account.PeerID(ids[0]), slot)
	check("connection report gone")
	if got := a.raw(t, token, "/api/peers"); strings.Contains(got, `"connections"`) {
		t.Fatalf("the list still shows a report after the stream closed:\n%s", got)
	}

	// A rename, a group, a policy between it and the rest.
	client{t: t, base: b.url, auth: "Token " + token}.call("PUT", "/api/peers/"+ids[1], map[string]any{"name": "renamed", "ssh_enabled": false, "login_expiration_enabled": false}, 200)
	check("renamed")
	g := obj(client{t: t, base: b.url, auth: "Token " + token}.call("POST", "/api/groups", map[string]any{"name": "web", "peers": []string{ids[0], ids[1]}}, 200))
	check("group")
	pols := list(owner.call("GET", "/api/policies", nil, 200))
	def := obj(pols[0])
	client{t: t, base: b.url, auth: "Token " + token}.call("PUT", "/api/policies/"+def["id"].(string), map[string]any{"name": def["name"], "enabled": false,
		"rules": []any{map[string]any{"name": "r", "enabled": true, "action": "accept", "bidirectional": true, "protocol": "all",
			"sources": []string{g["id"].(string)}, "destinations": []string{g["id"].(string)}}}}, 200)
	check("policy")
	client{t: t, base: b.url, auth: "Token " + token}.call("PUT", "/api/groups/"+g["id"].(string), map[string]any{"name": "web", "peers": []string{ids[0], ids[2]}}, 200)
	check("membership")

	// Approval (the account's peer approval on): the peer held for
	// approval, then approved (what it may reach changes with it).
	accSettings := func() map[string]any {
		return obj(obj(list(owner.call("GET", "/api/accounts", nil, 200))[0])["settings"])
	}
	s := accSettings()
	if s["extra"] == nil {
		s["extra"] = map[string]any{}
	}
	obj(s["extra"])["peer_approval_enabled"] = true
	client{t: t, base: b.url, auth: "Token " + token}.call("PUT", "/api/accounts/"+string(accID), map[string]any{"settings": s}, 200)
	for _, pending := range []bool{true, false} {
		client{t: t, base: b.url, auth: "Token " + token}.call("PUT", "/api/peers/"+ids[2], map[string]any{"name": "host-2", "ssh_enabled": false,
			"login_expiration_enabled": false, "approval_required": pending}, 200)
		check(fmt.Sprintf("approval required %v", pending))
		if want := fmt.Sprintf(`"approval_required":%v`, pending); !strings.Contains(a.raw(t, token, "/api/peers?name=host-2"), want) {
			t.Fatalf("approval required %v is not shown: %s", pending, a.raw(t, token, "/api/peers?name=host-2"))
		}
	}

	// Login expiration on: the peer added by the owner, last logged in two
	// days ago, shows expired.
	s = accSettings()
	s["peer_login_expiration_enabled"], s["peer_login_expiration"] = true, 3600
	client{t: t, base: b.url, auth: "Token " + token}.call("PUT", "/api/accounts/"+string(accID), map[string]any{"settings": s}, 200)
	check("expiration")
	if !strings.Contains(a.raw(t, token, "/api/peers/"+ids[3]), `"login_expired":true`) {
		t.Fatalf("the expired login is not shown: %s", a.raw(t, token, "/api/peers/"+ids[3]))
	}

	client{t: t, base: b.url, auth: "Token " + token}.call("DELETE", "/api/peers/"+ids[1], nil, 200)
	check("deleted")
	if strings.Contains(a.raw(t, token, "/api/peers"), ids[1]) {
		t.Fatal("the deleted peer is still listed")
	}
}

package httpapi_test

import (
	"bufio"
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/access"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/dnsadmin"
	"github.com/wiremesh/wiremesh/management/httpapi"
	"github.com/wiremesh/wiremesh/management/livefeed"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/routing"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/updates"
	"github.com/wiremesh/wiremesh/management/users"
)

// newLiveRig is the REST API with a live feed, its domain services
// wired to it as management/server wires them.
func newLiveRig(t *testing.T, eng storetest.Engine, feed *livefeed.Feed, timing httpapi.LiveTiming) *rig {
	t.Helper()
	st := eng.Open(t)
	hub := updates.NewHub()
	on := func(k livefeed.Kind) livefeed.Notifier { return livefeed.Notifier{Next: hub, Feed: feed, Kinds: k} }
	ps := peers.New(st, on(livefeed.PeerServiceKinds), nil, nil)
	ps.States = feed
	api := httpapi.New(httpapi.Options{Store: st, Users: users.New(users.Options{Store: st, Notify: on(livefeed.UserServiceKinds), LocalIdP: true}),
		Peers:   ps,
		Access:  access.New(st, on(livefeed.AccessServiceKinds), nil),
		Routing: routing.New(st, on(livefeed.RoutingServiceKinds), routing.Options{}),
		DNS:     dnsadmin.New(st, on(livefeed.DNSServiceKinds), dnsadmin.Options{}),
		Live:    feed, LiveTiming: timing})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	r := &rig{t: t, st: st, url: srv.URL}
	setup := obj(r.client("").call("POST", "/api/setup", map[string]any{"email": "owner@example.com", "password": ownerPassword, "name": "Owner", "create_pat": true}, 200))
	r.owner, r.ownerID = r.client("Token "+setup["personal_access_token"].(string)), setup["user_id"].(string)
	return r
}

// sseEvent is one event of a stream ("" for a comment line).
type sseEvent struct{ name, data string }

// stream is an open GET /api/events/stream; its reader goroutine ends
// when the body is closed (stop) or the server ends the stream.
type stream struct {
	events chan sseEvent
	stop   func()
}

func openStream(t *testing.T, base, authz string) (*stream, int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+httpapi.EventStreamPath, nil)
	req.Header.Set("Authorization", authz)
	// No keep-alive: a finished stream leaves no idle connection (and no
	// goroutine) behind.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode, string(raw)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	s := &stream{events: make(chan sseEvent, 64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				s.events <- sseEvent{name: "", data: line}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	s.stop = func() {
		cancel()
		resp.Body.Close()
		for range s.events {
		}
		<-done
	}
	t.Cleanup(s.stop)
	return s, http.StatusOK, ""
}

// next returns the next event named one of names (skipping comments),
// failing after d; ok is false when the stream ended.
func (s *stream) next(t *testing.T, d time.Duration) (sseEvent, bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return sseEvent{}, false
			}
			if ev.name == "" {
				continue
			}
			return ev, true
		case <-deadline:
			t.Fatalf("no event within %v", d)
		}
	}
}

// waitFor skips events until one named name, failing after d.
func (s *stream) waitFor(t *testing.T, name string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ev, ok := s.next(t, time.Until(deadline))
		if !ok {
			t.Fatalf("stream ended before a %s event", name)
		}
		if ev.name == name {
			return
		}
	}
}

// collect counts the events by name that arrive within d.
func (s *stream) collect(d time.Duration) map[string]int {
	got := map[string]int{}
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return got
			}
			if ev.name != "" {
				got[ev.name]++
			}
		case <-deadline:
			return got
		}
	}
}

// drain forgets whatever arrives within d.
func (s *stream) drain(d time.Duration) {
	deadline := time.After(d)
	for {
		select {
		case <-s.events:
		case <-deadline:
			return
		}
	}
}

// quiet fails if an event (not a comment) arrives within d.
func (s *stream) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-s.events:
			if ok && ev.name == "" {
				continue
			}
			t.Fatalf("got %+v (open %v), want nothing", ev, ok)
		case <-deadline:
			return
		}
	}
}

func insertPeer(t *testing.T, st *store.Store, id string, owner account.UserID) {
	t.Helper()
	ctx := context.Background()
	k, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	err = st.Tx(ctx, func(tx *store.Tx) error {
		u, err := tx.UserByID(ctx, owner)
		if err != nil {
			return err
		}
		acc, err := tx.In(u.AccountID).Account(ctx)
		if err != nil {
			return err
		}
		ip := acc.Network.Masked().Addr().Next()
		for range len(id) {
			ip = ip.Next()
		}
		return tx.In(u.AccountID).InsertPeer(ctx, account.Peer{ID: account.PeerID(id), AccountID: u.AccountID, UserID: owner, Key: k.Public(), IP: ip,
			Name: id, DNSLabel: id, CreatedAt: time.Now().UTC(), LastSeen: time.Now().UTC()})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEventStream: an admin's stream says ready, then names each kind
// another admin changes, a burst coalesced; a regular user's stream
// hears nothing of the account but its own peers' state; a revoked
// token ends its stream; the limits answer 429; Close ends every stream;
// no goroutine is left.
func TestEventStream(t *testing.T) { engines.Each(t, testEventStream) }

func testEventStream(t *testing.T, eng storetest.Engine) {
	feed := livefeed.New(livefeed.Options{MaxPerUser: 2})
	r := newLiveRig(t, eng, feed, httpapi.LiveTiming{Coalesce: 500 * time.Millisecond, Heartbeat: 100 * time.Millisecond, Recheck: 200 * time.Millisecond})
	admin := r.addCaller("admin2", account.RoleAdmin, false)
	regular := r.addCaller("regular", account.RoleUser, false)
	accID := admin.user.AccountID

	owner, code, msg := openStream(t, r.url, r.owner.auth)
	if owner == nil {
		t.Fatalf("owner's stream: %d %s", code, msg)
	}
	if ev, _ := owner.next(t, 5*time.Second); ev.name != "ready" || !strings.Contains(ev.data, `"serial":`) || !strings.Contains(ev.data, `"revision":`) {
		t.Fatalf("first event %+v, want ready with serial and revision", ev)
	}
	// Comments keep an idle stream open.
	select {
	case ev := <-owner.events:
		if ev.name != "" || ev.data != ": ping" {
			t.Fatalf("idle stream sent %+v, want the heartbeat comment", ev)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no heartbeat")
	}
	user, code, msg := openStream(t, r.url, regular.token)
	if user == nil {
		t.Fatalf("regular user's stream: %d %s", code, msg)
	}
	if ev, _ := user.next(t, 5*time.Second); ev.name != "ready" {
		t.Fatalf("regular user's first event %+v, want ready", ev)
	}

	// Another admin changes groups: each change is told, never more
	// events than changes (how many coalesce depends on the timing).
	for _, name := range []string{"a", "b", "c"} {
		r.client(admin.token).call("POST", "/api/groups", map[string]any{"name": name, "peers": []string{}}, 200)
	}
	got := owner.collect(1500 * time.Millisecond)
	if got["groups"] < 1 || got["groups"] > 3 || got["events"] < 1 {
		t.Fatalf("events after three group changes: %v, want groups 1-3 times and events", got)
	}
	user.quiet(t, 300*time.Millisecond)

	// Coalescing, with the feed directly: right after an event, a burst
	// within the coalescing window is one event per kind.
	feed.Publish(accID, livefeed.Groups)
	owner.waitFor(t, "groups", 5*time.Second)
	for range 20 {
		feed.Publish(accID, livefeed.Groups|livefeed.Policies)
	}
	if got := owner.collect(1500 * time.Millisecond); got["groups"] != 1 || got["policies"] != 1 {
		t.Fatalf("after a burst of 20 within the window: %v, want groups and policies once", got)
	}

	// A write no domain service notifies (no network changed): the REST
	// route announces it, as its module's kind.
	r.client(admin.token).call("POST", "/api/users/invites", map[string]any{"email": "new@example.com", "name": "New", "role": "user", "auto_groups": []string{}}, 200)
	owner.waitFor(t, "users", 5*time.Second)
	user.quiet(t, 800*time.Millisecond)
	owner.drain(100 * time.Millisecond) // the same write's other kinds

	// A change made elsewhere (the admin command, another instance): an
	// old serial is no news; a newer one is every kind.
	feed.External(accID, 1)
	owner.quiet(t, 800*time.Millisecond)
	feed.External(accID, 1<<40)
	got = map[string]int{}
	for range 10 {
		ev, _ := owner.next(t, 5*time.Second)
		got[ev.name]++
	}
	if want := map[string]int{"peers": 1, "groups": 1, "policies": 1, "setup-keys": 1, "users": 1, "routes": 1, "networks": 1, "dns": 1, "events": 1, "account": 1}; !maps.Equal(got, want) {
		t.Fatalf("after a change elsewhere: %v, want %v", got, want)
	}
	// The regular user reads none of those lists; settings it hears.
	if ev, _ := user.next(t, 5*time.Second); ev.name != "account" {
		t.Fatalf("regular user after a change elsewhere: %+v, want account", ev)
	}
	user.quiet(t, 300*time.Millisecond)

	// A peer's own state: the owner hears every peer, the regular user
	// only its own.
	insertPeer(t, r.st, "peer-owner", account.UserID(r.ownerID))
	insertPeer(t, r.st, "peer-regular", regular.user.ID)
	feed.PeerChanged(accID, "peer-owner", "")
	if ev, _ := owner.next(t, 5*time.Second); ev.name != "peers" {
		t.Fatalf("owner after a peer's change: %+v, want peers", ev)
	}
	user.quiet(t, 800*time.Millisecond)
	feed.PeerChanged(accID, "peer-regular", "")
	if ev, _ := user.next(t, 5*time.Second); ev.name != "peers" {
		t.Fatalf("regular user after its peer's change: %+v, want peers", ev)
	}

	// Limits: the regular user has 1 stream, may open 1 more.
	second, _, _ := openStream(t, r.url, regular.token)
	if second == nil {
		t.Fatal("second stream refused")
	}
	if s, code, msg := openStream(t, r.url, regular.token); s != nil || code != http.StatusTooManyRequests || !strings.Contains(msg, "this user has 2 open") {
		t.Fatalf("third stream of a user: %d %s, want 429 naming the limit", code, msg)
	}
	second.stop()

	// Revoking the token ends its stream with a reason.
	err := r.st.Tx(context.Background(), func(tx *store.Tx) error {
		return tx.In(accID).DeleteToken(context.Background(), regular.user.ID, account.TokenID("tok-regular"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if ev, ok := user.next(t, 5*time.Second); !ok || ev.name != "end" || !strings.Contains(ev.data, "no longer valid") {
		t.Fatalf("after revocation: %+v (open %v), want end", ev, ok)
	}
	if _, ok := user.next(t, 5*time.Second); ok {
		t.Fatal("stream still open after its end event")
	}

	// Shutdown ends the rest.
	feed.Close()
	for {
		if _, ok := owner.next(t, 5*time.Second); !ok {
			break
		}
	}
	if s, code, _ := openStream(t, r.url, r.owner.auth); s != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("stream after shutdown: %d, want 503", code)
	}
	owner.stop()
	user.stop()
	// Neither a stream's handler nor a reader is left. (The test
	// server's and HTTP clients' own goroutines are not the streams'.)
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := streamGoroutines()
		if left == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream goroutines left:\n%s", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// streamGoroutines returns the stacks of goroutines serving or reading a
// live event stream.
func streamGoroutines() string {
	buf := make([]byte, 1<<20)
	var out []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "(*liveStream)") || strings.Contains(g, "eventStream") || strings.Contains(g, "openStream.func") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// TestEventStreamOff: without a feed the route answers 404 naming why.
func TestEventStreamOff(t *testing.T) { engines.Each(t, testEventStreamOff) }

func testEventStreamOff(t *testing.T, eng storetest.Engine) {
	r := newRig(t, eng)
	code, body := r.do("GET", httpapi.EventStreamPath, r.owner.auth, "")
	if code != http.StatusNotFound || !strings.Contains(string(body), "live event streams are not enabled") {
		t.Fatalf("got %d %s, want 404 naming live event streams", code, body)
	}
}

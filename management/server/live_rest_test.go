package server_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/livefeed"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// liveEvents reads GET /api/events/stream's event names into a channel,
// closed when the stream ends.
func liveEvents(t *testing.T, a api) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/api/events/stream", nil)
	req.Header.Set("Authorization", a.auth)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		t.Fatalf("GET /api/events/stream: %s", resp.Status)
	}
	out := make(chan string, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				out <- name
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		for range out {
		}
		<-done
	})
	return out
}

// expect waits (at most 5 s) for an event named name, skipping others.
func expect(t *testing.T, evs <-chan string, name, why string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case got, ok := <-evs:
			if !ok {
				t.Fatalf("%s: the stream ended before a %s event", why, name)
			}
			if got == name {
				return
			}
		case <-deadline:
			t.Fatalf("%s: no %s event within 5 s", why, name)
		}
	}
}

// settle forgets events until none came for 400 ms.
func settle(evs <-chan string) {
	for {
		select {
		case <-evs:
		case <-time.After(400 * time.Millisecond):
			return
		}
	}
}

// pendingOf waits (at most 5 s) until sub has something pending that
// satisfies ok, and returns it.
func pendingOf(t *testing.T, sub *livefeed.Sub, why string, ok func(livefeed.Pending) bool) livefeed.Pending {
	t.Helper()
	var seen livefeed.Pending
	deadline := time.After(5 * time.Second)
	for {
		select {
		case <-sub.Wake():
			p := sub.Take()
			seen.Kinds |= p.Kinds
			for id, owner := range p.Peers {
				if seen.Peers == nil {
					seen.Peers = map[account.PeerID]account.UserID{}
				}
				seen.Peers[id] = owner
			}
			if ok(seen) {
				return seen
			}
		case <-deadline:
			t.Fatalf("%s: nothing the feed published within 5 s matched (got %+v)", why, seen)
		}
	}
}

// hasPeer: p names the peer as changed.
func hasPeer(id account.PeerID) func(livefeed.Pending) bool {
	return func(p livefeed.Pending) bool { _, ok := p.Peers[id]; return ok }
}

// TestLiveEventsREST: on the wired server, the live feed is told of each
// change however it is made, naming the peer where one changed: a REST
// write, a peer registering (the peers service), its Sync stream opening
// and closing (online, offline) and its connection report; a REST
// client's stream hears them; and it ends when the server ends its
// streams.
func TestLiveEventsREST(t *testing.T) { engines.Each(t, testLiveEventsREST) }

func testLiveEventsREST(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ctx := context.Background()
	evs := liveEvents(t, o)
	expect(t, evs, "ready", "a new stream")
	accID := account.ID(obj(list(o.call("GET", "/api/accounts", nil, 200))[0])["id"].(string))
	sub, err := e.srv.Live.Subscribe(accID, "probe")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	sk := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))
	pendingOf(t, sub, "a setup key created", func(p livefeed.Pending) bool { return p.Kinds&livefeed.SetupKeys != 0 })
	expect(t, evs, "setup-keys", "a setup key created through the API")

	a, b := testpeer.New(e.conn, "a"), testpeer.New(e.conn, "b")
	for _, p := range []*testpeer.Peer{a, b} {
		if _, err := p.Login(ctx, sk["key"].(string)); err != nil {
			t.Fatal(err)
		}
	}
	peerID := func(p *testpeer.Peer) account.PeerID {
		var id account.PeerID
		err := e.srv.Store.Read(ctx, func(tx *store.Tx) error {
			pr, err := tx.PeerByKey(ctx, p.Public())
			id = pr.ID
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	idA, idB := peerID(a), peerID(b)
	pendingOf(t, sub, "peers registering", func(p livefeed.Pending) bool {
		return hasPeer(idA)(p) && hasPeer(idB)(p) && p.Kinds&livefeed.Groups != 0
	})
	expect(t, evs, "peers", "peers registering")
	settle(evs)
	sub.Take()

	st, err := a.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	online := pendingOf(t, sub, "a peer going online", hasPeer(idA))
	if online.Kinds&(livefeed.Groups|livefeed.Policies) != 0 {
		t.Errorf("a peer's Sync (login, meta) published %v: neither groups nor policies changed", online.Kinds)
	}
	expect(t, evs, "peers", "a peer going online")
	settle(evs)
	sub.Take()

	if err := a.ReportConns(ctx, &mgmtpb.WiremeshConnection{WgPubKey: b.Public().String(), Type: mgmtpb.WiremeshConnection_P2P}); err != nil {
		t.Fatal(err)
	}
	pendingOf(t, sub, "a connection report", hasPeer(idA))
	expect(t, evs, "peers", "a connection report")
	settle(evs)
	sub.Take()

	st.Close()
	pendingOf(t, sub, "a peer going offline", hasPeer(idA))
	expect(t, evs, "peers", "a peer going offline")
	settle(evs)

	e.srv.EndStreams()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-evs:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("the stream outlived the server's EndStreams")
		}
	}
}

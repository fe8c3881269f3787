package server_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/testpeer"
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

// TestLiveEventsREST: on the wired server, the live event stream names
// what changes however it changes: a REST write, a peer registering
// (the peers service), its Sync stream opening and closing (online,
// offline) and its connection report; and it ends when the server shuts
// its streams.
func TestLiveEventsREST(t *testing.T) { engines.Each(t, testLiveEventsREST) }

func testLiveEventsREST(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ctx := context.Background()
	evs := liveEvents(t, o)
	expect(t, evs, "ready", "a new stream")

	sk := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))
	expect(t, evs, "setup-keys", "a setup key created through the API")
	settle(evs)

	a, b := testpeer.New(e.conn, "a"), testpeer.New(e.conn, "b")
	for _, p := range []*testpeer.Peer{a, b} {
		if _, err := p.Login(ctx, sk["key"].(string)); err != nil {
			t.Fatal(err)
		}
	}
	expect(t, evs, "peers", "peers registering")
	settle(evs)

	st, err := a.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, evs, "peers", "a peer going online")
	settle(evs)

	if err := a.ReportConns(ctx, &mgmtpb.WiremeshConnection{WgPubKey: b.Public().String(), Type: mgmtpb.WiremeshConnection_P2P}); err != nil {
		t.Fatal(err)
	}
	expect(t, evs, "peers", "a connection report")
	settle(evs)

	st.Close()
	expect(t, evs, "peers", "a peer going offline")
	settle(evs)

	e.srv.Live.Close()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-evs:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("the stream outlived the server's shutdown of live streams")
		}
	}
}

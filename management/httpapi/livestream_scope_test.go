package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/httpapi"
	"github.com/wiremesh/wiremesh/management/livefeed"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

// setViewBlock turns the account's regular_users_view_blocked on or off
// through the API.
func setViewBlock(r *rig, on bool) {
	r.t.Helper()
	acc := obj(list(r.owner.call("GET", "/api/accounts", nil, 200))[0])
	settings := obj(acc["settings"])
	settings["regular_users_view_blocked"] = on
	r.owner.call("PUT", "/api/accounts/"+acc["id"].(string), map[string]any{"settings": settings}, 200)
}

// TestEventStreamViewBlock: for every role, service user or not, with
// regular_users_view_blocked off and on, a stream hears a kind exactly
// when the caller may GET its list: a view-blocked service user (whose
// role would read everything) hears no groups, users or activity; every
// caller hears account. A regular user's stream open when the block is
// switched on ends, its permissions changed.
func TestEventStreamViewBlock(t *testing.T) { engines.Each(t, testEventStreamViewBlock) }

func testEventStreamViewBlock(t *testing.T, eng storetest.Engine) {
	feed := livefeed.New(livefeed.Options{})
	r := newLiveRig(t, eng, feed, httpapi.LiveTiming{Coalesce: 50 * time.Millisecond, Heartbeat: time.Second, Recheck: time.Minute, MinRecheck: 10 * time.Millisecond})
	callers := []caller{{id: "owner", token: r.owner.auth}}
	for _, role := range account.Roles {
		if role == account.RoleOwner {
			continue
		}
		for _, svc := range []bool{false, true} {
			callers = append(callers, r.addCaller(fmt.Sprintf("%s-svc-%v", role, svc), role, svc))
		}
	}
	lists := map[string]string{"groups": "/api/groups", "users": "/api/users", "events": "/api/events", "policies": "/api/policies", "setup-keys": "/api/setup-keys"}
	var accID account.ID
	for _, c := range callers[1:] {
		accID = c.user.AccountID
	}
	var early *stream
	for _, block := range []bool{false, true} {
		setViewBlock(r, block)
		if block {
			// Opened before the block: the setting change ends it.
			if ev, ok := early.next(t, 5*time.Second); !ok || ev.name != "end" || !strings.Contains(ev.data, "permissions changed") {
				t.Fatalf("regular user's stream when the view block went on: %+v (open %v), want end naming the change", ev, ok)
			}
		}
		streams := make([]*stream, len(callers))
		for i, c := range callers {
			s, code, msg := openStream(t, r.url, c.token)
			if s == nil {
				t.Fatalf("%s (block %v): stream %d %s", c.id, block, code, msg)
			}
			s.waitFor(t, "ready", 5*time.Second)
			streams[i] = s
		}
		if !block {
			early = streams[len(streams)-1]
			for i, c := range callers {
				if c.user.Role == account.RoleUser && !c.user.ServiceUser {
					early = streams[i]
				}
			}
		}
		feed.Publish(accID, livefeed.Groups|livefeed.Users|livefeed.Events|livefeed.Policies|livefeed.SetupKeys|livefeed.Account)
		got := make([]map[string]int, len(callers))
		var wg sync.WaitGroup
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i] = streams[i].collect(1500 * time.Millisecond)
			}()
		}
		wg.Wait()
		for i, c := range callers {
			if got[i]["account"] != 1 {
				t.Errorf("%s (block %v): account heard %d times, want 1", c.id, block, got[i]["account"])
			}
			for kind, path := range lists {
				code, body := r.do("GET", path, c.token, "")
				// The users list of a caller who reads only its own user
				// is not the account's: changes of others are not told.
				want := code == http.StatusOK && (kind != "users" || strings.Count(string(body), `"email"`) > 1)
				if heard := got[i][kind] > 0; heard != want {
					t.Errorf("%s (block %v): heard %s %v, but GET %s answers %d (want heard %v)", c.id, block, kind, heard, path, code, want)
				}
			}
			if !block && streams[i] != early {
				streams[i].stop()
			}
		}
	}
}

// TestEventStreamOwnPeers: a user who sees only its own peers hears
// what an admin does to them (rename, delete: the peer is gone when the
// stream looks), and nothing of another user's peer; a change of its
// role ends its stream, naming why.
func TestEventStreamOwnPeers(t *testing.T) { engines.Each(t, testEventStreamOwnPeers) }

func testEventStreamOwnPeers(t *testing.T, eng storetest.Engine) {
	feed := livefeed.New(livefeed.Options{})
	r := newLiveRig(t, eng, feed, httpapi.LiveTiming{Coalesce: 50 * time.Millisecond, Heartbeat: time.Second, Recheck: time.Minute, MinRecheck: 10 * time.Millisecond})
	regular := r.addCaller("regular", account.RoleUser, false)
	other := r.addCaller("other", account.RoleUser, false)
	insertPeer(t, r.st, "peer-regular", regular.user.ID)
	insertPeer(t, r.st, "peer-other", other.user.ID)
	user, code, msg := openStream(t, r.url, regular.token)
	if user == nil {
		t.Fatalf("stream: %d %s", code, msg)
	}
	user.waitFor(t, "ready", 5*time.Second)

	r.owner.call("PUT", "/api/peers/peer-regular", map[string]any{"name": "renamed", "ssh_enabled": false, "login_expiration_enabled": false}, 200)
	if ev, _ := user.next(t, 5*time.Second); ev.name != "peers" {
		t.Fatalf("after an admin renamed the user's peer: %+v, want peers", ev)
	}
	user.quiet(t, 300*time.Millisecond)

	r.owner.call("DELETE", "/api/peers/peer-other", nil, 200)
	user.quiet(t, 500*time.Millisecond)

	r.owner.call("DELETE", "/api/peers/peer-regular", nil, 200)
	if ev, _ := user.next(t, 5*time.Second); ev.name != "peers" {
		t.Fatalf("after an admin deleted the user's peer: %+v, want peers", ev)
	}

	r.owner.call("PUT", "/api/users/regular", map[string]any{"role": "admin", "auto_groups": []string{}, "is_blocked": false}, 200)
	for {
		ev, ok := user.next(t, 5*time.Second)
		if !ok {
			t.Fatal("stream ended without an end event after the role change")
		}
		if ev.name == "end" {
			if !strings.Contains(ev.data, "permissions changed") {
				t.Fatalf("end after a role change: %s, want it named", ev.data)
			}
			break
		}
	}
	// Reconnected, it hears what an admin does.
	admin, _, _ := openStream(t, r.url, regular.token)
	admin.waitFor(t, "ready", 5*time.Second)
	r.owner.call("POST", "/api/groups", map[string]any{"name": "g", "peers": []string{}}, 200)
	admin.waitFor(t, "groups", 5*time.Second)
}

// TestEventStreamRecheckReadOnly: a stream's periodic credential checks
// only read: its token's last use stays what the opening request wrote.
func TestEventStreamRecheckReadOnly(t *testing.T) { engines.Each(t, testEventStreamRecheckReadOnly) }

func testEventStreamRecheckReadOnly(t *testing.T, eng storetest.Engine) {
	feed := livefeed.New(livefeed.Options{})
	r := newLiveRig(t, eng, feed, httpapi.LiveTiming{Heartbeat: time.Second, Recheck: 20 * time.Millisecond})
	c := r.addCaller("reader", account.RoleAdmin, false)
	_, hash, _ := strings.Cut(c.token, " ")
	h, err := auth.ParsePAT(hash)
	if err != nil {
		t.Fatal(err)
	}
	lastUsed := func() time.Time {
		var tok account.Token
		err := r.st.Read(context.Background(), func(tx *store.Tx) error {
			var err error
			tok, err = tx.TokenByHash(context.Background(), h)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return tok.LastUsed
	}
	s, code, msg := openStream(t, r.url, c.token)
	if s == nil {
		t.Fatalf("stream: %d %s", code, msg)
	}
	s.waitFor(t, "ready", 5*time.Second)
	opened := lastUsed()
	if opened.IsZero() {
		t.Fatal("the opening request did not record the token's use")
	}
	time.Sleep(400 * time.Millisecond) // ~20 checks
	if got := lastUsed(); !got.Equal(opened) {
		t.Fatalf("token last used moved from %v to %v while the stream was open: its checks write", opened, got)
	}
	// They still check: deleting the token ends the stream.
	err = r.st.Tx(context.Background(), func(tx *store.Tx) error {
		return tx.In(c.user.AccountID).DeleteToken(context.Background(), c.user.ID, account.TokenID("tok-reader"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if ev, ok := s.next(t, 5*time.Second); !ok || ev.name != "end" {
		t.Fatalf("after the token's deletion: %+v (open %v), want end", ev, ok)
	}
}

// TestEventStreamInviteAccepted: accepting an invitation (a public
// route, which the REST layer does not announce) tells the admins' streams
// of the new user.
func TestEventStreamInviteAccepted(t *testing.T) { engines.Each(t, testEventStreamInviteAccepted) }

func testEventStreamInviteAccepted(t *testing.T, eng storetest.Engine) {
	feed := livefeed.New(livefeed.Options{})
	r := newLiveRig(t, eng, feed, httpapi.LiveTiming{Coalesce: 50 * time.Millisecond, Heartbeat: time.Second, Recheck: time.Minute})
	inv := obj(r.owner.call("POST", "/api/users/invites", map[string]any{"email": "new@example.com", "name": "New", "role": "user", "auto_groups": []string{}}, 200))
	s, code, msg := openStream(t, r.url, r.owner.auth)
	if s == nil {
		t.Fatalf("stream: %d %s", code, msg)
	}
	s.waitFor(t, "ready", 5*time.Second)
	s.drain(200 * time.Millisecond)
	r.client("").call("POST", "/api/users/invites/"+inv["invite_token"].(string)+"/accept", map[string]any{"password": "Another-passw0rd!"}, 200)
	got := s.collect(1500 * time.Millisecond)
	if got["users"] < 1 || got["events"] < 1 {
		t.Fatalf("after an invitation was accepted: %v, want users and events", got)
	}
}

// TestEventStreamRecheckRate: user changes make a stream check its
// credentials at most once per MinRecheck; a change arriving sooner is
// told after that wait, not lost.
func TestEventStreamRecheckRate(t *testing.T) { engines.Each(t, testEventStreamRecheckRate) }

func testEventStreamRecheckRate(t *testing.T, eng storetest.Engine) {
	feed := livefeed.New(livefeed.Options{})
	r := newLiveRig(t, eng, feed, httpapi.LiveTiming{Coalesce: 10 * time.Millisecond, Heartbeat: time.Minute, Recheck: time.Minute, MinRecheck: 400 * time.Millisecond})
	c := r.addCaller("watcher", account.RoleAdmin, false)
	s, code, msg := openStream(t, r.url, c.token)
	if s == nil {
		t.Fatalf("stream: %d %s", code, msg)
	}
	s.waitFor(t, "ready", 5*time.Second)
	feed.Publish(c.user.AccountID, livefeed.Users)
	s.waitFor(t, "users", 5*time.Second)
	start := time.Now()
	feed.Publish(c.user.AccountID, livefeed.Users|livefeed.Groups)
	got := map[string]int{}
	for got["users"] == 0 || got["groups"] == 0 {
		ev, ok := s.next(t, 5*time.Second)
		if !ok {
			t.Fatal("stream ended")
		}
		got[ev.name]++
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("a second user change was told after %v: checked again sooner than MinRecheck", d)
	}
}

package livefeed

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/management/account"
)

func TestKindString(t *testing.T) {
	tests := []struct {
		k    Kind
		want string
	}{
		{Peers, "peers"}, {SetupKeys, "setup-keys"}, {Account, "account"}, {DNS | Peers, "peers,dns"}, {0, ""},
		{AllKinds, "peers,groups,policies,setup-keys,users,routes,networks,dns,events,account"},
	}
	for _, tt := range tests {
		if got := tt.k.String(); got != tt.want {
			t.Errorf("Kind(%d).String() = %q, want %q", tt.k, got, tt.want)
		}
	}
}

func woken(s *Sub) bool {
	select {
	case <-s.Wake():
		return true
	default:
		return false
	}
}

// TestPublishCoalesces: changes published while a stream does not look
// add up into one wake-up and one Pending; other accounts hear nothing.
func TestPublishCoalesces(t *testing.T) {
	f := New(Options{})
	a, err := f.Subscribe("acc-a", "u1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.Subscribe("acc-b", "u2")
	if err != nil {
		t.Fatal(err)
	}
	f.Publish("acc-a", Groups)
	f.Publish("acc-a", Policies|Events)
	f.PeerChanged("acc-a", "p1", "")
	f.PeerChanged("acc-a", "p1", "u1") // a named owner wins over unknown
	f.PeerChanged("acc-a", "p1", "")   // and is kept
	f.PeerChanged("acc-a", "p2", "")
	f.External("acc-a", 7)
	f.External("acc-a", 5)
	if !woken(a) {
		t.Fatal("stream of acc-a not woken")
	}
	if woken(a) {
		t.Error("stream woken twice for one burst")
	}
	want := Pending{Kinds: Groups | Policies | Events, Serial: 7, Peers: map[account.PeerID]account.UserID{"p1": "u1", "p2": ""}}
	if d := cmp.Diff(want, a.Take()); d != "" {
		t.Errorf("pending (-want +got):\n%s", d)
	}
	if p := a.Take(); !p.Empty() {
		t.Errorf("pending after Take: %+v", p)
	}
	if woken(b) || !b.Take().Empty() {
		t.Error("another account's stream heard the change")
	}
}

// TestManyPeers: past maxPendingPeers a stream knows only that many
// peers changed.
func TestManyPeers(t *testing.T) {
	f := New(Options{})
	s, _ := f.Subscribe("acc", "u")
	for i := range maxPendingPeers + 1 {
		f.PeerChanged("acc", account.PeerID(rune('a'+i%26))+account.PeerID(string(rune(i))), "u")
	}
	p := s.Take()
	if !p.ManyPeers || p.Peers != nil {
		t.Errorf("got %d peers, many=%v; want none kept and many", len(p.Peers), p.ManyPeers)
	}
}

// TestLimits: the per-user and per-account limits refuse with
// ErrTooManyStreams, and a closed stream frees its place.
func TestLimits(t *testing.T) {
	f := New(Options{MaxPerUser: 2, MaxPerAccount: 3})
	s1, err := f.Subscribe("acc", "u1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Subscribe("acc", "u1"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Subscribe("acc", "u1"); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("third stream of a user: %v, want %v", err, ErrTooManyStreams)
	}
	if _, err := f.Subscribe("acc", "u2"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Subscribe("acc", "u3"); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("fourth stream of an account: %v, want %v", err, ErrTooManyStreams)
	}
	if _, err := f.Subscribe("other", "u9"); err != nil {
		t.Fatalf("another account: %v", err)
	}
	s1.Close()
	s1.Close() // idempotent
	if _, err := f.Subscribe("acc", "u3"); err != nil {
		t.Fatalf("after a close: %v", err)
	}
	if got := f.Streams("acc"); got != 3 {
		t.Errorf("Streams = %d, want 3", got)
	}
}

// TestClose: Close ends every stream and refuses new ones; a stream
// closed after the feed is harmless.
func TestClose(t *testing.T) {
	f := New(Options{})
	s, _ := f.Subscribe("acc", "u")
	f.Close()
	select {
	case <-s.Done():
	default:
		t.Fatal("stream not ended by Close")
	}
	s.Close()
	f.Close()
	if _, err := f.Subscribe("acc", "u"); !errors.Is(err, ErrClosed) {
		t.Errorf("Subscribe after Close: %v, want %v", err, ErrClosed)
	}
	f.Publish("acc", Peers) // nobody left: must not panic or block
}

type countNotifier struct{ n int }

func (c *countNotifier) AccountChanged(account.ID) { c.n++ }

// TestNotifier: a domain service's notification reaches the Sync fan-out
// and the feed as the service's kinds.
func TestNotifier(t *testing.T) {
	f := New(Options{})
	s, _ := f.Subscribe("acc", "u")
	next := &countNotifier{}
	Notifier{Next: next, Feed: f, Kinds: Routes | Networks}.AccountChanged("acc")
	if next.n != 1 {
		t.Errorf("next notified %d times, want 1", next.n)
	}
	if got := s.Take().Kinds; got != Routes|Networks {
		t.Errorf("kinds = %v, want routes,networks", got)
	}
}

// TestMaxStreams: the server-wide limit counts every account's streams,
// refuses past it naming it, and a closed stream (or Close) frees places.
func TestMaxStreams(t *testing.T) {
	f := New(Options{MaxStreams: 2})
	a, err := f.Subscribe("acc-a", "u1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Subscribe("acc-b", "u2"); err != nil {
		t.Fatal(err)
	}
	_, err = f.Subscribe("acc-c", "u3")
	if !errors.Is(err, ErrTooManyStreams) || !strings.Contains(err.Error(), "the server has 2 open") {
		t.Fatalf("third stream of the server: %v, want %v naming the server's limit", err, ErrTooManyStreams)
	}
	a.Close()
	a.Close() // idempotent: frees one place, not two
	if _, err := f.Subscribe("acc-c", "u3"); err != nil {
		t.Fatalf("after a close: %v", err)
	}
	if _, err := f.Subscribe("acc-d", "u4"); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("past the limit again: %v", err)
	}
}

// TestServiceKinds: what each domain service publishes. An agent's login
// or meta change (the peers service) must not make the groups and
// policies pages refetch; a registration or deletion moves group counts.
func TestServiceKinds(t *testing.T) {
	if PeerServiceKinds&(Groups|Policies) != 0 {
		t.Errorf("peers service publishes %v, want neither groups nor policies", PeerServiceKinds)
	}
	f := New(Options{})
	s, _ := f.Subscribe("acc", "u")
	f.MembershipChanged("acc")
	if got := s.Take().Kinds; got != Groups|Policies {
		t.Errorf("membership change published %v, want groups and policies", got)
	}
}

// TestRequeue: what a stream puts back merges with what came since and
// does not wake it; too many peers stay "many".
func TestRequeue(t *testing.T) {
	f := New(Options{})
	s, _ := f.Subscribe("acc", "u")
	f.Publish("acc", Users)
	f.PeerChanged("acc", "p1", "")
	<-s.Wake()
	p := s.Take()
	f.PeerChanged("acc", "p1", "u")
	f.External("acc", 3)
	<-s.Wake()
	s.Requeue(p)
	if woken(s) {
		t.Error("Requeue woke the stream")
	}
	want := Pending{Kinds: Users, Serial: 3, Peers: map[account.PeerID]account.UserID{"p1": "u"}}
	if d := cmp.Diff(want, s.Take()); d != "" {
		t.Errorf("after Requeue (-want +got):\n%s", d)
	}
	many := Pending{Peers: map[account.PeerID]account.UserID{}}
	for i := range maxPendingPeers + 1 {
		many.Peers[account.PeerID(fmt.Sprint(i))] = ""
	}
	s.Requeue(many)
	if got := s.Take(); !got.ManyPeers || got.Peers != nil {
		t.Errorf("requeued %d peers: many=%v, %d kept", len(many.Peers), got.ManyPeers, len(got.Peers))
	}
}

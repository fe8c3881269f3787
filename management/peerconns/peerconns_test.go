package peerconns

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
)

func mustKey(t *testing.T) key.Public {
	t.Helper()
	k, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	return k.Public()
}

// TestResolve: a report is hostile input. Only keys of peers of the
// reporter's account are kept, each once; the reporter itself, unknown
// types and entries past MaxEntries are dropped.
func TestResolve(t *testing.T) {
	self, a, b, foreign := mustKey(t), mustKey(t), mustKey(t), mustKey(t)
	of := map[key.Public]account.PeerID{self: "self", a: "a", b: "b"}
	peerOf := func(k key.Public) (account.PeerID, bool) { id, ok := of[k]; return id, ok }
	for _, tc := range []struct {
		name string
		in   []Entry
		want []Conn
	}{
		{"empty", nil, []Conn{}},
		{"kept", []Entry{{Key: a, Type: P2P, Latency: time.Millisecond}, {Key: b, Type: Relayed}},
			[]Conn{{Peer: "a", Type: P2P, Latency: time.Millisecond}, {Peer: "b", Type: Relayed}}},
		{"foreign key", []Entry{{Key: foreign, Type: P2P}, {Key: a, Type: Connecting}}, []Conn{{Peer: "a", Type: Connecting}}},
		{"itself", []Entry{{Key: self, Type: P2P}}, []Conn{}},
		{"twice", []Entry{{Key: a, Type: P2P}, {Key: a, Type: Relayed}}, []Conn{{Peer: "a", Type: P2P}}},
		{"bad type", []Entry{{Key: a, Type: 0}, {Key: b, Type: 9}}, []Conn{}},
		{"negative latency", []Entry{{Key: a, Type: P2P, Latency: -time.Second}}, []Conn{{Peer: "a", Type: P2P}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Resolve("self", tc.in, peerOf)); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
		})
	}

	// Too many entries: only the first MaxEntries are read.
	many := map[key.Public]account.PeerID{}
	var in []Entry
	for i := range MaxEntries + 10 {
		k := mustKey(t)
		many[k] = account.PeerID(fmt.Sprintf("p%05d", i))
		in = append(in, Entry{Key: k, Type: P2P})
	}
	got := Resolve("self", in, func(k key.Public) (account.PeerID, bool) { id, ok := many[k]; return id, ok })
	if len(got) != MaxEntries || got[len(got)-1].Peer != account.PeerID(fmt.Sprintf("p%05d", MaxEntries-1)) {
		t.Errorf("Resolve kept %d entries (last %v), want the first %d", len(got), got[len(got)-1], MaxEntries)
	}
}

// TestTrackerLifetime: a report is kept only while the reporter's stream
// is open, replaced by the next one and gone when the stream closes.
func TestTrackerLifetime(t *testing.T) {
	tr := New()
	const acc, other = account.ID("acc"), account.ID("other")
	conns := []Conn{{Peer: "b", Type: Relayed}, {Peer: "a", Type: P2P}, {Peer: "c", Type: Connecting}}
	if tr.Report(acc, "x", conns) {
		t.Fatal("a report without an open stream was kept")
	}
	s := tr.Open(acc, "x")
	if !tr.Report(acc, "x", conns) {
		t.Fatal("a report with the stream open was refused")
	}
	got, ok := tr.Of(acc, "x")
	want := []Conn{{Peer: "a", Type: P2P}, {Peer: "b", Type: Relayed}, {Peer: "c", Type: Connecting}}
	if diff := cmp.Diff(want, got); !ok || diff != "" {
		t.Errorf("Of = %v (-want +got):\n%s", ok, diff)
	}
	if _, ok := tr.Of(other, "x"); ok {
		t.Error("another account's peer of the same ID has the report")
	}
	ids := []account.PeerID{"y", "x"}
	counts, has := make([]Counts, 2), make([]bool, 2)
	tr.CountsOf(acc, func(i int) account.PeerID { return ids[i] }, 2, counts, has)
	if diff := cmp.Diff([]Counts{{}, {P2P: 1, Relayed: 1, Connecting: 1}}, counts); diff != "" || has[0] || !has[1] {
		t.Errorf("CountsOf: has %v (-want +got):\n%s", has, diff)
	}
	tr.Report(acc, "x", []Conn{{Peer: "a", Type: Relayed}})
	tr.CountsOf(acc, func(i int) account.PeerID { return ids[i] }, 2, counts, has)
	if counts[1] != (Counts{Relayed: 1}) {
		t.Errorf("after a new report CountsOf = %+v, want one relayed", counts[1])
	}
	tr.Close(acc, "x", s)
	if _, ok := tr.Of(acc, "x"); ok {
		t.Error("the report outlived the stream")
	}
	if tr.Report(acc, "x", conns) {
		t.Error("a report after the stream closed was kept")
	}
	var nilTracker *Tracker
	nilTracker.Open(acc, "x")
	if nilTracker.Report(acc, "x", conns) {
		t.Error("a nil tracker kept a report")
	}
}

// TestTrackerStreams: an old stream of a peer ending after a new one
// opened (a reconnect) leaves the new stream's slot and report alone;
// only the current stream's end frees them.
func TestTrackerStreams(t *testing.T) {
	tr := New()
	const acc = account.ID("acc")
	conns := []Conn{{Peer: "a", Type: P2P}}
	old := tr.Open(acc, "x")
	cur := tr.Open(acc, "x")
	if old == cur {
		t.Fatalf("two streams got the same slot %d", old)
	}
	tr.Close(acc, "x", old)
	if !tr.Report(acc, "x", conns) {
		t.Fatal("the old stream's end closed the new stream's slot")
	}
	tr.Close(acc, "x", old)
	if _, ok := tr.Of(acc, "x"); !ok {
		t.Fatal("the old stream's end dropped the new stream's report")
	}
	tr.Close(acc, "x", cur)
	if _, ok := tr.Of(acc, "x"); ok {
		t.Fatal("the report outlived the current stream")
	}
	if tr.Report(acc, "x", conns) {
		t.Fatal("a report after the current stream closed was kept")
	}
}

// TestAdmit: a report is read only with the peer's stream open, and at
// most once per MinInterval; a new stream starts afresh.
func TestAdmit(t *testing.T) {
	tr := New()
	const acc = account.ID("acc")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if tr.Admit(acc, "x", t0) {
		t.Fatal("admitted a report without an open stream")
	}
	s := tr.Open(acc, "x")
	for _, tc := range []struct {
		name string
		at   time.Duration
		want bool
	}{
		{"first", 0, true},
		{"right after", time.Millisecond, false},
		{"just under the interval", MinInterval - time.Millisecond, false},
		{"at the interval", MinInterval, true},
		{"again too soon", MinInterval + 100*time.Millisecond, false},
		{"clock stepped back", -time.Hour, true},
		{"then too soon", -time.Hour + time.Millisecond, false},
	} {
		if got := tr.Admit(acc, "x", t0.Add(tc.at)); got != tc.want {
			t.Errorf("%s: Admit = %v, want %v", tc.name, got, tc.want)
		}
	}
	if tr.Admit(acc, "y", t0.Add(time.Hour)) {
		t.Error("another peer's open stream admitted a report of a peer without one")
	}
	if tr.Admit("other", "x", t0.Add(time.Hour)) {
		t.Error("a peer of the same ID in another account was admitted")
	}
	tr.Close(acc, "x", s)
	if tr.Admit(acc, "x", t0.Add(time.Hour)) {
		t.Error("admitted a report after the stream closed")
	}
	tr.Open(acc, "x")
	if !tr.Admit(acc, "x", t0.Add(-time.Hour)) {
		t.Error("a new stream's first report was held to the old stream's interval")
	}
	var nilTracker *Tracker
	if nilTracker.Admit(acc, "x", t0) {
		t.Error("a nil tracker admitted a report")
	}
}

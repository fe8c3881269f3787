package httpapi

import (
	"slices"
	"testing"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
)

// TestPeerListCounts: a cached list's counts by position are those of the
// reach entry asked about: reused while it is the same entry (its maps),
// worked out again for a new one (a new serial, or the same serial past
// an expiry) even when it holds the same number of peers, so an answer
// never shows an older entry's counts.
func TestPeerListCounts(t *testing.T) {
	l := &peerList{peers: []listedPeer{{p: account.Peer{ID: "a"}}, {p: account.Peer{ID: "b"}}, {p: account.Peer{ID: "c"}}}}
	first := reachEntry{ix: &networkmap.Index{}, counts: map[account.PeerID]int{"a": 2, "c": 1}}
	got := l.countsIn(first)
	if want := []int32{2, 0, 1}; !slices.Equal(got, want) {
		t.Fatalf("counts = %v, want %v", got, want)
	}
	if again := l.countsIn(first); &again[0] != &got[0] {
		t.Error("the same entry's counts were worked out again")
	}
	// Same serial, new maps (an expiry passed): b now reaches a.
	next := reachEntry{serial: first.serial, ix: &networkmap.Index{}, counts: map[account.PeerID]int{"a": 1, "b": 1}}
	if got, want := l.countsIn(next), []int32{1, 1, 0}; !slices.Equal(got, want) {
		t.Fatalf("after a new entry: counts = %v, want %v (the old entry's are stale)", got, want)
	}
}

// TestPeerListPlace: states read in the list's order are placed by
// position; one out of order, after a peer that went, or of a peer the
// list does not hold is placed through the index or not at all.
func TestPeerListPlace(t *testing.T) {
	l := &peerList{index: map[account.PeerID]int{}}
	for i, id := range []account.PeerID{"a", "b", "c", "d"} {
		l.peers = append(l.peers, listedPeer{p: account.Peer{ID: id}})
		l.index[id] = i
	}
	next := 0
	var got []int
	for _, id := range []account.PeerID{"a", "c", "new", "b", "d"} {
		i, ok := l.place(&next, id)
		if !ok {
			i = -1
		}
		got = append(got, i)
	}
	if want := []int{0, 2, -1, 1, 3}; !slices.Equal(got, want) {
		t.Fatalf("placed at %v, want %v", got, want)
	}
}

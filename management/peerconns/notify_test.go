package peerconns

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/management/account"
)

// TestNotifying: the tracker tells of a report that changes what the
// peer shows (a first report, a peer appearing or changing type, the
// report going with its stream), not of a new latency alone, a report
// without a stream, or a replaced stream's close.
func TestNotifying(t *testing.T) {
	var got []account.PeerID
	tr := NewNotifying(func(_ account.ID, id account.PeerID) { got = append(got, id) })
	s := tr.Open("acc", "a")
	steps := []struct {
		name string
		do   func()
		want []account.PeerID
	}{
		{"first report", func() { tr.Report("acc", "a", []Conn{{Peer: "b", Type: Connecting}}) }, []account.PeerID{"a"}},
		{"same report", func() { tr.Report("acc", "a", []Conn{{Peer: "b", Type: Connecting}}) }, nil},
		{"type changes", func() { tr.Report("acc", "a", []Conn{{Peer: "b", Type: P2P, Latency: time.Millisecond}}) }, []account.PeerID{"a"}},
		{"latency only", func() { tr.Report("acc", "a", []Conn{{Peer: "b", Type: P2P, Latency: 9 * time.Millisecond}}) }, nil},
		{"peer appears", func() {
			tr.Report("acc", "a", []Conn{{Peer: "c", Type: Relayed}, {Peer: "b", Type: P2P}})
		}, []account.PeerID{"a"}},
		{"no stream", func() { tr.Report("acc", "z", []Conn{{Peer: "b", Type: P2P}}) }, nil},
		{"replaced stream closes", func() {
			s2 := tr.Open("acc", "a")
			tr.Close("acc", "a", s)
			s = s2
		}, nil},
		{"stream ends with a report", func() {
			tr.Report("acc", "a", []Conn{{Peer: "b", Type: P2P}})
			got = nil
			tr.Close("acc", "a", s)
		}, []account.PeerID{"a"}},
	}
	for _, st := range steps {
		got = nil
		st.do()
		if d := cmp.Diff(st.want, got); d != "" {
			t.Errorf("%s: notified (-want +got):\n%s", st.name, d)
		}
	}
}

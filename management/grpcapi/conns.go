package grpcapi

import (
	"context"
	"reflect"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/management/peerconns"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Connection reports (PeerSystemMeta.wiremeshConnections, docs/extensions.md):
// our agents say, through SyncMeta, how each of their connections goes.
// They come from any peer, so they are hostile input: at most
// peerconns.MaxEntries entries are read, and only keys of peers of the
// reporter's own account are kept, resolved against the account state the
// Sync streams already share (no store read per report), and a peer's
// reports are read at most once per peerconns.MinInterval.

// connEntries converts a report at the boundary; nil: the meta has none.
func connEntries(m *mgmtpb.PeerSystemMeta) []peerconns.Entry {
	wc := m.GetWiremeshConnections()
	if wc == nil {
		return nil
	}
	in := wc.GetConnections()
	if len(in) > peerconns.MaxEntries {
		in = in[:peerconns.MaxEntries]
	}
	out := make([]peerconns.Entry, 0, len(in))
	for _, c := range in {
		k, err := key.ParsePublic(c.GetWgPubKey())
		if err != nil {
			continue
		}
		var t peerconns.Type
		switch c.GetType() {
		case mgmtpb.WiremeshConnection_CONNECTING:
			t = peerconns.Connecting
		case mgmtpb.WiremeshConnection_P2P:
			t = peerconns.P2P
		case mgmtpb.WiremeshConnection_RELAYED:
			t = peerconns.Relayed
		default:
			continue
		}
		out = append(out, peerconns.Entry{Key: k, Type: t, Latency: time.Duration(c.GetLatencyMicros()) * time.Microsecond})
	}
	return out
}

// reportConns keeps peer's connection report, resolved against its
// account's peers. The tracker is asked first: a report from a peer with
// no open Sync stream here, or sent within peerconns.MinInterval of its
// last one, is dropped before anything is read. Keys resolve only against
// the account state this instance's streams already loaded (never a store
// read, never a new snapshot entry: that would keep unowned account state
// in memory, which only the end of a Sync stream frees).
func (s *Server) reportConns(ctx context.Context, peer account.Peer, entries []peerconns.Entry) {
	if s.o.Conns == nil || !s.o.Conns.Admit(peer.AccountID, peer.ID, s.o.Now()) {
		return
	}
	keys, ok := s.snaps.peerKeys(peer.AccountID)
	if !ok {
		// The stream has not loaded the account yet (it just opened): the
		// agent's next report will resolve.
		s.o.Log.DebugContext(ctx, "connection report before the account state loaded: dropped", "peer", peer.ID)
		return
	}
	conns := peerconns.Resolve(peer.ID, entries, func(k key.Public) (account.PeerID, bool) {
		id, ok := keys[k]
		return id, ok
	})
	s.o.Conns.Report(peer.AccountID, peer.ID, conns)
}

// sameMeta: a SyncMeta that only carries a new connection report need not
// rewrite the peer's stored metadata (a store transaction per report). A
// meta without a hostname is never stored (peers.Login ignores it), so it
// changes nothing either.
func sameMeta(stored, got account.Meta) bool {
	return got.Hostname == "" || reflect.DeepEqual(stored, got)
}

// peerKeys returns the account's peers by WireGuard key from the state
// its streams loaded, built once per state; false: none is loaded.
func (c *snapshots) peerKeys(acc account.ID) (map[key.Public]account.PeerID, bool) {
	e := c.lookup(acc)
	if e == nil {
		return nil, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.loaded || e.ix == nil {
		return nil, false
	}
	if e.keysOf == e.ix {
		return e.keys, true
	}
	keys := make(map[key.Public]account.PeerID, len(e.remote))
	for id := range e.remote {
		if p, ok := e.ix.Peer(id); ok {
			keys[p.Key] = id
		}
	}
	e.keys, e.keysOf = keys, e.ix
	return keys, true
}

// keysIndex is snapEntry's cache of peerKeys.
type keysIndex struct {
	keys   map[key.Public]account.PeerID
	keysOf *networkmap.Index
}

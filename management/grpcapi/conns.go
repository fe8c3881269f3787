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
// Sync streams already share (no store read per report).

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
// account's peers. It is dropped when the peer has no open Sync stream
// here (the tracker says so) or the account state cannot be read.
func (s *Server) reportConns(ctx context.Context, peer account.Peer, entries []peerconns.Entry) {
	if s.o.Conns == nil {
		return
	}
	keys, err := s.snaps.peerKeys(ctx, s, peer.AccountID)
	if err != nil {
		s.o.Log.WarnContext(ctx, "connection report: read account", "peer", peer.ID, "err", err)
		return
	}
	conns := peerconns.Resolve(peer.ID, entries, func(k key.Public) (account.PeerID, bool) {
		id, ok := keys[k]
		return id, ok
	})
	s.o.Conns.Report(peer.AccountID, peer.ID, conns)
}

// sameMeta: a SyncMeta that only carries a new connection report need not
// rewrite the peer's stored metadata (a store transaction per report).
func sameMeta(stored, got account.Meta) bool { return reflect.DeepEqual(stored, got) }

// peerKeys returns the account's peers by WireGuard key, built once per
// loaded account state.
func (c *snapshots) peerKeys(ctx context.Context, s *Server, acc account.ID) (map[key.Public]account.PeerID, error) {
	// Zero: the serial is read, so a peer that joined a moment ago counts.
	ix, remote, err := c.index(ctx, s.o.Store, acc, time.Time{})
	if err != nil || ix == nil {
		return nil, err
	}
	e := c.entry(acc)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.keysOf == ix {
		return e.keys, nil
	}
	keys := make(map[key.Public]account.PeerID, len(remote))
	for id := range remote {
		if p, ok := ix.Peer(id); ok {
			keys[p.Key] = id
		}
	}
	e.keys, e.keysOf = keys, ix
	return keys, nil
}

// keysIndex is snapEntry's cache of peerKeys.
type keysIndex struct {
	keys   map[key.Public]account.PeerID
	keysOf *networkmap.Index
}

package grpcapi

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/management/peerconns"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Sync streams the peer's network map: the full state at once, a new map
// whenever its account changes, and fresh TURN credentials before the old
// ones expire. A newer Sync of the same peer replaces this one.
func (s *Server) Sync(req *mgmtpb.EncryptedMessage, stream grpc.ServerStreamingServer[mgmtpb.EncryptedMessage]) error {
	ctx := stream.Context()
	// Refuse before any other work, opening the envelope (an X25519) among
	// it: under a reconnect storm the refused retry, and must cost next to
	// nothing (at 50,000 peers retries opened cost more than the maps).
	if n := s.setups.Add(1); n > int64(s.o.MaxSyncs) {
		s.setups.Add(-1)
		return status.Error(codes.ResourceExhausted, "too many concurrent sync streams")
	}
	setupDone := sync.OnceFunc(func() { s.setups.Add(-1) })
	defer setupDone()
	var sr mgmtpb.SyncRequest
	pk, sh, err := s.open(req, &sr)
	if err != nil {
		return err
	}
	peer, err := s.registeredPeer(ctx, pk)
	if err != nil {
		return err
	}
	// A peer added by a user must log in again when its login expires.
	expiry, err := s.checkAccess(ctx, peer)
	if err != nil {
		return err
	}
	s.syncs.Add(1)
	defer s.syncs.Add(-1)
	if sr.GetMeta() != nil {
		if err := s.o.Peers.UpdateMeta(ctx, pk, metaFrom(ctx, sr.GetMeta())); err != nil {
			s.o.Log.WarnContext(ctx, "update meta on sync", "peer", peer.ID, "err", err)
		}
	}
	if s.o.Jobs != nil {
		if err := s.o.Jobs.SetSupport(ctx, peer.AccountID, peer.ID, sr.GetWiremeshCapabilities().GetDebugBundleUpload()); err != nil {
			s.o.Log.WarnContext(ctx, "record job support", "peer", peer.ID, "err", err)
		}
	}
	legacy := legacyClient(sr.GetMeta().GetNetbirdVersion())
	deltas := sr.GetWiremeshCapabilities().GetNetworkMapDeltas()
	derivedDNS := sr.GetWiremeshCapabilities().GetDerivedPeerDNS()

	sub := s.o.Hub.Subscribe(peer.AccountID, peer.ID)
	var connSlot peerconns.Stream // set below, before anything can return
	defer func() {
		defer func() {
			if s.o.Hub.Streams(peer.AccountID) == 0 {
				s.snaps.forget(peer.AccountID) // nobody left to share it
			}
		}()
		if s.o.Hub.Unsubscribe(sub) {
			// Only the current stream marks the peer offline: a replaced one
			// must not overwrite its successor's state. The request context is
			// gone by now, so use a short fresh one.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			s.o.Conns.Close(peer.AccountID, peer.ID, connSlot)
			_ = s.o.Peers.SetConnected(cctx, peer.AccountID, peer.ID, false)
			s.syncEnded(cctx, peer.AccountID, peer.ID)
		}
	}()
	connSlot = s.o.Conns.Open(peer.AccountID, peer.ID)
	if err := s.o.Peers.SetConnected(ctx, peer.AccountID, peer.ID, true); err != nil {
		s.o.Log.WarnContext(ctx, "mark connected", "peer", peer.ID, "err", err)
	}
	s.o.Log.InfoContext(ctx, "sync stream open", "peer", peer.ID, "ip", peer.IP)

	send := func(r *mgmtpb.SyncResponse) error {
		msg, err := s.seal(sh, r)
		if err != nil {
			return err
		}
		return stream.Send(msg)
	}
	var sent uint64
	var lastFP uint64
	var lastSig networkmap.Sig
	// For delta streams: the account state the client's map reflects, and
	// the serial of the last map or delta it was sent.
	var lastIx *networkmap.Index
	var clientSerial uint64
	// The account's SSH users (sshauth.go) as last sent: they are not
	// part of the map's signature nor of deltas, so a change sends the
	// whole map.
	var lastSSH uint64
	// prepare builds and seals the current map if it is newer than what
	// the peer has (nil: nothing to send), holding one of the map slots;
	// done=true when the peer was deleted. Sending happens after the slot
	// is released, so a client slow to read holds up nobody else.
	var lastSize int64 // of the last message prepared, the estimate for the next
	prepare := func(full bool, since time.Time) (msg *sealedMsg, done bool, err error) {
		// The share of the send budget (sendbudget.go) is taken before
		// anything is built, so streams waiting for it hold no map.
		est := lastSize
		if est == 0 {
			est = s.mapEstimate.Load()
		}
		held, err := s.sendBudget.acquire(ctx, est)
		if err != nil {
			return nil, true, nil
		}
		defer func() {
			if msg == nil {
				s.sendBudget.release(held)
				return
			}
			msg.held = held
			lastSize = int64(len(msg.wire))
		}()
		select {
		case s.mapSlots <- struct{}{}:
		case <-ctx.Done():
			return nil, true, nil
		}
		defer func() { <-s.mapSlots }()
		ix, remote, err := s.snaps.index(ctx, s.o.Store, peer.AccountID, since)
		if err != nil {
			return nil, false, status.Error(codes.Internal, "compute network map")
		}
		var (
			m  networkmap.Map
			ok bool
		)
		sshSame := ix == nil || s.sshFingerprint(ctx, ix, peer.ID) == lastSSH
		if ix != nil {
			// Unchanged inputs, unchanged map: skip the computation.
			if sig, known := ix.Signature(peer.ID); known && !full && sshSame && sig == lastSig {
				s.mapsSkipped.Add(1)
				if lastIx != nil {
					lastIx = ix // same map in this state
				}
				return nil, false, nil
			} else if known {
				lastSig = sig
			}
			if deltas && !full && sshSame && lastIx != nil && ix.Has(peer.ID) {
				if ix.Serial() <= sent {
					return nil, false, nil
				}
				if d, ok := s.delta(peer.AccountID, peer.ID, lastIx, ix, remote); ok {
					lastIx, sent = ix, ix.Serial()
					if d == nil {
						s.mapsSkipped.Add(1)
						return nil, false, nil
					}
					d.BaseSerial, d.Serial = clientSerial, ix.Serial()
					clientSerial = d.Serial
					lastFP = 0 // the client's map is no longer the last full one
					s.mapsSent.Add(1)
					s.deltasSent.Add(1)
					msg, err = s.sealMsg(sh, &mgmtpb.SyncResponse{WiremeshDelta: d})
					return msg, false, err
				}
			}
			m, ok = ix.Compute(peer.ID)
		}
		if !ok {
			// Out of the map because its user was blocked or its login
			// expired: the client must log in again.
			if _, err := s.checkAccess(ctx, peer); err != nil {
				s.o.Log.InfoContext(ctx, "closing the stream of a peer without access", "peer", peer.ID, "err", err)
				return nil, true, err
			}
			s.o.Log.InfoContext(ctx, "peer removed, closing its stream", "peer", peer.ID)
			msg, err := s.sealMsg(sh, deletedResponse(sent+1))
			return msg, true, err
		}
		if !full && m.Serial <= sent {
			return nil, false, nil
		}
		var cfg = (*mgmtpb.NetbirdConfig)(nil)
		if full {
			cfg = s.netbirdConfig(ctx, peer)
		}
		sent = m.Serial
		r, b := syncResponse(m, cfg, respFor{legacy: legacy, derivedDNS: derivedDNS}, remote)
		lastSSH = s.addSSHAuth(ctx, m.Self, m.Serial, r.NetworkMap.PeerConfig, r.NetworkMap)
		// A change elsewhere in the account that leaves this peer's map as
		// it was (another peer's policy, a group it is not in) is not sent:
		// only the affected peers get an update.
		plain, fp := encodeMapPooled(s.fpSeed, r, b, &s.bufs)
		defer s.bufs.put(plain)
		if deltas {
			lastIx = ix
		}
		if !full && fp == lastFP {
			s.mapsSkipped.Add(1)
			return nil, false, nil
		}
		lastFP = fp
		clientSerial = m.Serial
		s.mapsSent.Add(1)
		wire, err := s.sealWire(sh, plain)
		if err != nil {
			return nil, false, err
		}
		s.mapEstimate.Store(int64(cap(wire)))
		return &sealedMsg{wire: wire}, false, nil
	}
	// written is closed once the transport is done with the last message
	// sent: a stream builds its next map only then, so a client slow to
	// read has at most one message queued and gets the newest map when it
	// catches up, never a backlog of older ones.
	nothingQueued := make(chan struct{})
	close(nothingQueued)
	written := (<-chan struct{})(nothingQueued)
	push := func(full bool, since time.Time) (bool, error) {
		select {
		case <-written:
		case <-ctx.Done():
			return true, nil
		case <-s.closed:
			return true, status.Error(codes.Unavailable, "server shutting down")
		}
		msg, done, err := prepare(full, since)
		if err == nil && msg != nil {
			written, err = s.sendSealed(ctx, stream, msg)
		}
		return done, err
	}
	// Our agents' first maps hold a slot until they have been read: gRPC
	// keeps an encoded message until the client reads it, so new peers
	// arriving faster than they read would pile whole maps up in memory.
	// A second message on a stream is only taken once its first has been
	// written out, so an empty response after the map tells when to free
	// the slot (agents that ask for deltas ignore a response without a map
	// or delta; official clients are not sent one). A slot is held 5 s at
	// most: a client that does not read delays others, never stops them.
	release := func() {}
	if deltas {
		select {
		case s.firstMaps <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		release = sync.OnceFunc(func() { <-s.firstMaps })
		defer release()
	}
	if done, err := push(true, time.Time{}); done || err != nil {
		return err
	}
	if deltas {
		t := time.AfterFunc(5*time.Second, release)
		err := send(&mgmtpb.SyncResponse{})
		t.Stop()
		release()
		if err != nil {
			return err
		}
	}
	setupDone()
	refresh := time.NewTicker(s.refreshEvery())
	defer refresh.Stop()
	var expired <-chan time.Time
	if !expiry.IsZero() {
		t := time.NewTimer(time.Until(expiry) + 10*time.Millisecond)
		defer t.Stop()
		expired = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-expired:
			return status.Error(codes.PermissionDenied, peers.ErrLoginExpired.Error())
		case <-s.closed:
			return status.Error(codes.Unavailable, "server shutting down")
		case <-sub.Replaced():
			return status.Error(codes.Aborted, "replaced by a newer sync stream of the same peer")
		case <-sub.Wake():
			changed, before := sub.Changed(), s.mapsSent.Load()
			if done, err := push(false, changed); done || err != nil {
				return err
			}
			if !changed.IsZero() && s.mapsSent.Load() != before {
				s.fanout.observe(time.Since(changed))
			}
		case <-refresh.C:
			if err := send(&mgmtpb.SyncResponse{NetbirdConfig: s.netbirdConfig(ctx, peer)}); err != nil {
				return err
			}
		}
	}
}

// SyncMeta stores refreshed system metadata.
func (s *Server) SyncMeta(ctx context.Context, req *mgmtpb.EncryptedMessage) (*mgmtpb.Empty, error) {
	var r mgmtpb.SyncMetaRequest
	pk, _, err := s.open(req, &r)
	if err != nil {
		return nil, err
	}
	if r.GetMeta() == nil {
		return nil, status.Error(codes.FailedPrecondition, "peer system meta is required")
	}
	p, err := s.registeredPeer(ctx, pk)
	if err != nil {
		return nil, err
	}
	meta := metaFrom(ctx, r.GetMeta())
	entries := connEntries(r.GetMeta())
	// Our agents send their whole metadata with every connection report:
	// only a change is written (official clients always are).
	if r.GetMeta().GetWiremeshConnections() == nil || !sameMeta(p.Meta, meta) {
		if err := s.o.Peers.UpdateMeta(ctx, pk, meta); err != nil {
			return nil, status.Error(codes.Internal, "update meta")
		}
	}
	if r.GetMeta().GetWiremeshConnections() != nil {
		s.reportConns(ctx, p, entries)
	}
	return &mgmtpb.Empty{}, nil
}

// Logout deletes the calling peer.
func (s *Server) Logout(ctx context.Context, req *mgmtpb.EncryptedMessage) (*mgmtpb.Empty, error) {
	var e mgmtpb.Empty
	pk, _, err := s.open(req, &e)
	if err != nil {
		return nil, err
	}
	p, err := s.registeredPeer(ctx, pk)
	if err != nil {
		return nil, err
	}
	if err := s.o.Peers.Delete(ctx, p.AccountID, p.ID, "peer:"+string(p.ID)); err != nil {
		return nil, status.Error(codes.Internal, "delete peer")
	}
	return &mgmtpb.Empty{}, nil
}

// DefaultJobFirstMessage is Options.JobFirstMessage's default.
const DefaultJobFirstMessage = 30 * time.Second

// firstJobMessage waits a bounded time for the Job stream's handshake, so
// a client that opens the stream and says nothing does not hold it (and a
// goroutine) forever. The reader ends when Recv does: at once, or when this
// handler returns and grpc cancels the stream.
func (s *Server) firstJobMessage(ctx context.Context, stream grpc.BidiStreamingServer[mgmtpb.EncryptedMessage, mgmtpb.EncryptedMessage]) (*mgmtpb.EncryptedMessage, error) {
	wait := s.o.JobFirstMessage
	if wait <= 0 {
		wait = DefaultJobFirstMessage
	}
	type result struct {
		m   *mgmtpb.EncryptedMessage
		err error
	}
	got := make(chan result, 1)
	go func() {
		m, err := stream.Recv()
		got <- result{m, err}
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case r := <-got:
		return r.m, r.err
	case <-t.C:
		return nil, status.Error(codes.DeadlineExceeded, "no job handshake within "+wait.String())
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-s.closed:
		return nil, status.Error(codes.Unavailable, "server shutting down")
	}
}

// encodeMap marshals a response holding a network map once, for both
// sending and comparing: the map without its serial is encoded and hashed
// (with the posture check paths) into the fingerprint that tells whether
// a stream's map changed, and the message is assembled from that encoding.
// Protobuf readers accept fields in any order, so the serial (NetworkMap
// field 1) goes in front of the rest of the map, the map (SyncResponse
// field 5) after the other fields, and the bulk (remote peers and peer
// DNS records, marshaled once per account state) after the map's other
// fields. b may be nil (everything is marshaled here then).
func encodeMap(seed maphash.Seed, r *mgmtpb.SyncResponse, b *bulk) (plain []byte, fp uint64) {
	return encodeMapPooled(seed, r, b, nil)
}

// encodeMapPooled is encodeMap with its buffers from pool (nil: allocated);
// the caller puts plain back when done with it.
func encodeMapPooled(seed maphash.Seed, r *mgmtpb.SyncResponse, b *bulk, pool *bufPool) (plain []byte, fp uint64) {
	nm := r.GetNetworkMap()
	serial := nm.GetSerial()
	nm.Serial = 0
	body := encodeBody(nm, b, pool)
	defer pool.put(body)
	nm.Serial = serial
	var h maphash.Hash
	h.SetSeed(seed)
	h.Write(body)
	for _, ch := range r.GetChecks() {
		for _, f := range ch.GetFiles() {
			h.WriteByte(0)
			h.WriteString(f)
		}
	}
	fp = h.Sum64()

	r.NetworkMap = nil
	plain, _ = proto.MarshalOptions{}.MarshalAppend(pool.get(proto.Size(r)+len(body)+32), r)
	r.NetworkMap = nm
	var head []byte
	if serial != 0 {
		head = protowire.AppendTag(head, 1, protowire.VarintType)
		head = protowire.AppendVarint(head, serial)
	}
	plain = protowire.AppendTag(plain, 5, protowire.BytesType)
	plain = protowire.AppendVarint(plain, uint64(len(head)+len(body)))
	plain = append(append(plain, head...), body...)
	return plain, fp
}

// Field numbers of the bulk of a map.
const (
	fieldNetworkMapRemotePeers = 3
	fieldNetworkMapDNSConfig   = 6
	fieldDNSConfigCustomZones  = 3
	fieldCustomZoneRecords     = 2
)

var deterministic = proto.MarshalOptions{Deterministic: true}

// encodeBody encodes nm, taking its remote peers and its first zone's
// records from b when b matches them.
func encodeBody(nm *mgmtpb.NetworkMap, b *bulk, pool *bufPool) []byte {
	dc := nm.GetDNSConfig()
	var zone *mgmtpb.CustomZone
	if zs := dc.GetCustomZones(); len(zs) > 0 {
		zone = zs[0]
	}
	if b == nil || len(b.peers) != len(nm.GetRemotePeers()) || len(b.records) != len(zone.GetRecords()) {
		body, _ := deterministic.Marshal(nm)
		return body
	}
	peers := nm.RemotePeers
	nm.RemotePeers, nm.DNSConfig = nil, nil
	body, _ := deterministic.Marshal(nm)
	nm.RemotePeers, nm.DNSConfig = peers, dc
	// DNSConfig: its own fields but the zones, the first zone with its
	// records from b, then the other zones. Every size is known before
	// writing, so the map is written once into a buffer of its exact size
	// (growing a buffer of a whole map copies it: at 2,000 peers that was
	// most of the bytes a fan-out allocated).
	var inner, zoneHead []byte
	var others [][]byte
	zoneLen, innerLen := 0, 0
	if dc != nil {
		zones := dc.CustomZones
		dc.CustomZones = nil
		inner, _ = deterministic.Marshal(dc)
		dc.CustomZones = zones
		innerLen = len(inner)
		if zone != nil {
			recs := zone.Records
			zone.Records = nil
			zoneHead, _ = deterministic.Marshal(zone)
			zone.Records = recs
			zoneLen = len(zoneHead)
			for _, r := range b.records {
				zoneLen += protowire.SizeTag(fieldCustomZoneRecords) + protowire.SizeBytes(len(r))
			}
			innerLen += protowire.SizeTag(fieldDNSConfigCustomZones) + protowire.SizeBytes(zoneLen)
			for _, z := range zones[1:] {
				w, _ := deterministic.Marshal(z)
				others = append(others, w)
				innerLen += protowire.SizeTag(fieldDNSConfigCustomZones) + protowire.SizeBytes(len(w))
			}
		}
	}
	size := len(body)
	for _, p := range b.peers {
		size += protowire.SizeTag(fieldNetworkMapRemotePeers) + protowire.SizeBytes(len(p))
	}
	if dc != nil {
		size += protowire.SizeTag(fieldNetworkMapDNSConfig) + protowire.SizeBytes(innerLen)
	}
	out := append(pool.get(size), body...)
	for _, p := range b.peers {
		out = protowire.AppendTag(out, fieldNetworkMapRemotePeers, protowire.BytesType)
		out = protowire.AppendBytes(out, p)
	}
	if dc == nil {
		return out
	}
	out = protowire.AppendTag(out, fieldNetworkMapDNSConfig, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(innerLen))
	out = append(out, inner...)
	if zone != nil {
		out = protowire.AppendTag(out, fieldDNSConfigCustomZones, protowire.BytesType)
		out = protowire.AppendVarint(out, uint64(zoneLen))
		out = append(out, zoneHead...)
		for _, r := range b.records {
			out = protowire.AppendTag(out, fieldCustomZoneRecords, protowire.BytesType)
			out = protowire.AppendBytes(out, r)
		}
		for _, w := range others {
			out = protowire.AppendTag(out, fieldDNSConfigCustomZones, protowire.BytesType)
			out = protowire.AppendBytes(out, w)
		}
	}
	return out
}

// syncEnded tells o.Ended that a peer's stream ended, unless the server is
// shutting down (the peer will reconnect, here or to another instance).
func (s *Server) syncEnded(ctx context.Context, acc account.ID, id account.PeerID) {
	if s.o.Ended == nil {
		return
	}
	select {
	case <-s.closed:
		return
	default:
	}
	if err := s.o.Ended.SyncEnded(ctx, acc, id); err != nil {
		s.o.Log.WarnContext(ctx, "sync stream end", "peer", id, "err", err)
	}
}

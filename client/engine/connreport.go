package engine

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Connection reports: the agent tells management how each of its peer
// connections goes (P2P, relayed, connecting), in its system metadata
// (PeerSystemMeta.wiremeshConnections, sent through SyncMeta), so the
// dashboard can show it. Management keeps the report while this peer's
// Sync stream lives, so it is sent again on every new stream.

// maxReportedConns bounds a report (management reads no more).
const maxReportedConns = 4096

// connReportEvery is how often the report is compared and, if changed,
// sent: at most one report a second, however often connections flap.
const connReportEvery = time.Second

// connReporter sends the report when it changes: at most once per tick
// and never two at once (run sends synchronously from one goroutine).
type connReporter struct {
	// current is the connections now, sorted by key.
	current func() []*mgmtpb.WiremeshConnection
	// streams counts the Sync streams opened (mgmtclient.Client.Streams).
	streams func() uint64
	send    func(context.Context, []*mgmtpb.WiremeshConnection) error
	log     *slog.Logger
	// handled, if set, is called after each tick is dealt with (tests).
	handled func()

	// owned by run: the last report sent, and on which stream
	last       []*mgmtpb.WiremeshConnection
	lastStream uint64
	sent       bool
}

// run reports at every tick until ctx ends.
func (r *connReporter) run(ctx context.Context, ticks <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		r.tick(ctx)
		if r.handled != nil {
			r.handled()
		}
	}
}

// tick sends the report if it changed since the last one sent, or a new
// stream opened since.
func (r *connReporter) tick(ctx context.Context) {
	s := r.streams()
	if s == 0 {
		return // no stream yet: management would drop the report
	}
	cur := r.current()
	if r.sent && s == r.lastStream && sameConns(cur, r.last) {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := r.send(cctx, cur)
	cancel()
	if err != nil {
		// Tried again at the next tick.
		r.log.Debug("connection report", "err", err)
		return
	}
	r.last, r.lastStream, r.sent = cur, s, true
}

func sameConns(a, b []*mgmtpb.WiremeshConnection) bool {
	return slices.EqualFunc(a, b, func(x, y *mgmtpb.WiremeshConnection) bool { return proto.Equal(x, y) })
}

// connType is how a peer connection in state goes.
func connType(state string, relayed bool) mgmtpb.WiremeshConnection_Type {
	switch {
	case state != "Connected":
		return mgmtpb.WiremeshConnection_CONNECTING
	case relayed:
		return mgmtpb.WiremeshConnection_RELAYED
	}
	return mgmtpb.WiremeshConnection_P2P
}

// currentConns lists the engine's peer connections, by key.
func (e *Engine) currentConns() []*mgmtpb.WiremeshConnection {
	e.mu.Lock()
	out := make([]*mgmtpb.WiremeshConnection, 0, len(e.peers))
	for k, r := range e.peers {
		st := r.conn.Status()
		out = append(out, &mgmtpb.WiremeshConnection{WgPubKey: k.String(), Type: connType(st.State, st.Relayed)})
	}
	e.mu.Unlock()
	slices.SortFunc(out, func(a, b *mgmtpb.WiremeshConnection) int { return strings.Compare(a.WgPubKey, b.WgPubKey) })
	if len(out) > maxReportedConns {
		out = out[:maxReportedConns]
	}
	return out
}

// syncMetaFunc sends this agent's system metadata (mgmtclient.Client.SyncMeta).
type syncMetaFunc func(context.Context, *mgmtpb.PeerSystemMeta) error

// metaFiles is the last posture-check answer, which every metadata this
// agent sends carries (a connection report must not erase it). Its lock
// is held while any metadata is built AND sent: the connection reporter
// and the posture reporter each send full metadata from their own
// goroutine, and management keeps the last one it receives, so a report
// built with older files must not reach it after a newer answer.
type metaFiles struct {
	mu    sync.Mutex
	files []*mgmtpb.File
}

// sendConns sends a copy of base carrying the last files and conns.
func (m *metaFiles) sendConns(ctx context.Context, send syncMetaFunc, base *mgmtpb.PeerSystemMeta, conns []*mgmtpb.WiremeshConnection) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	meta := proto.Clone(base).(*mgmtpb.PeerSystemMeta)
	meta.Files = m.files
	meta.WiremeshConnections = &mgmtpb.WiremeshConnections{Connections: conns}
	return send(ctx, meta)
}

// sendFiles sends a copy of base carrying files, a new posture answer.
// They are kept even if sending fails: the next connection report then
// carries the newest answer, not an older one.
func (m *metaFiles) sendFiles(ctx context.Context, send syncMetaFunc, base *mgmtpb.PeerSystemMeta, files []*mgmtpb.File) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files = files
	meta := proto.Clone(base).(*mgmtpb.PeerSystemMeta)
	meta.Files = files
	return send(ctx, meta)
}

// sendConns sends the report with this agent's metadata.
func (e *Engine) sendConns(ctx context.Context, conns []*mgmtpb.WiremeshConnection) error {
	return e.files.sendConns(ctx, e.mgmt.SyncMeta, e.meta, conns)
}

// reportConns runs the connection reporter until ctx ends.
func (e *Engine) reportConns(ctx context.Context) {
	t := time.NewTicker(connReportEvery)
	defer t.Stop()
	r := &connReporter{current: e.currentConns, streams: e.mgmt.Streams, send: e.sendConns, log: e.log}
	r.run(ctx, t.C)
}

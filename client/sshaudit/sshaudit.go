// Package sshaudit sends what the agent's SSH server reports (sessions
// started and ended, logins and channels refused), and the host key
// mismatches this peer's own `netbird ssh` saw (reported through the
// daemon), to management for its activity log, through WiremeshSSHEvents (docs/extensions.md). Events
// wait in a queue bounded in count and bytes that never blocks a session:
// when management is away and the queue is full the oldest go, counted,
// and management is told how many. One goroutine (Run) sends them in
// batches. A NetBird server, which has no such method, answers
// Unimplemented: reporting then stops for the agent's run. It does not
// decide anything about access (client/sshserver does).
package sshaudit

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/internal/unixuser"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Limits: management reads at most MaxBatch events per report and refuses
// longer fields (management/sshaudit); the queue's defaults.
const (
	MaxBatch          = 64
	DefaultMaxQueued  = 512
	DefaultMaxBytes   = 128 << 10
	maxReason         = 256
	maxForward        = 262
	maxJWTUser        = 256
	maxFingerprint    = 50 // "SHA256:" and 43 characters of base64
	maxBatchesPerTick = 8
	maxBackoffTicks   = 64
	sendTimeout       = 10 * time.Second
)

// Options configure a Reporter.
type Options struct {
	// Send delivers one report (mgmtclient.Client.SSHEvents).
	Send func(context.Context, *mgmtpb.WiremeshSSHEventsRequest) error
	Log  *slog.Logger
	// MaxQueued and MaxBytes bound the queue (0: the defaults).
	MaxQueued, MaxBytes int
}

// Reporter queues events and sends them. Record is safe for concurrent
// use; Run (or Tick) runs on one goroutine.
type Reporter struct {
	o   Options
	log *slog.Logger

	mu      sync.Mutex
	queue   []queued
	bytes   int
	seq     uint64 // of the last event queued
	dropped uint64 // lost since the last report management accepted
	lost    uint64 // lost in all, for Stats
	off     bool   // management does not take reports

	// owned by the sending goroutine
	backoff, wait int // ticks
}

type queued struct {
	ev   *mgmtpb.WiremeshSSHEvent
	size int
	seq  uint64
}

// New returns a Reporter with an empty queue.
func New(o Options) *Reporter {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.MaxQueued <= 0 {
		o.MaxQueued = DefaultMaxQueued
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	return &Reporter{o: o, log: o.Log}
}

// Record queues e (sshserver.Options.Audit). It never blocks on the
// network: past the bounds events are dropped and counted, refusals
// first (oldest first), then the oldest sessions: a client can make
// refusals at will, and must not push its own session out of the log
// with them.
func (r *Reporter) Record(e sshserver.Event) {
	ev := wireEvent(e)
	if ev == nil {
		return
	}
	r.enqueue(ev)
}

// enqueue queues ev, dropping past the bounds (Record).
func (r *Reporter) enqueue(ev *mgmtpb.WiremeshSSHEvent) {
	size := proto.Size(ev)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.off {
		return
	}
	r.seq++
	r.queue = append(r.queue, queued{ev: ev, size: size, seq: r.seq})
	r.bytes += size
	for len(r.queue) > r.o.MaxQueued || r.bytes > r.o.MaxBytes {
		r.dropOne()
	}
}

// dropOne drops the oldest refusal or host key mismatch queued (any
// local user can report those, through the daemon), or the oldest event
// if none is. The scan is over a bounded queue, and only when it is full.
func (r *Reporter) dropOne() {
	i := slices.IndexFunc(r.queue, func(q queued) bool {
		t := q.ev.GetType()
		return t == mgmtpb.WiremeshSSHEvent_REFUSED || t == mgmtpb.WiremeshSSHEvent_HOST_KEY_MISMATCH
	})
	if i < 0 {
		i = 0
	}
	r.bytes -= r.queue[i].size
	r.queue = slices.Delete(r.queue, i, i+1)
	r.dropped++
	r.lost++
}

// HostKeyMismatch is what this peer's own SSH client saw: the server at
// Target:Port presented a host key (fingerprint Presented) other than
// the one the map gives for that peer (Expected), logging in as User.
type HostKeyMismatch struct {
	Target              netip.Addr
	Port                uint16
	User                string
	Presented, Expected string // ssh.FingerprintSHA256 form
	At                  time.Time
}

// RecordHostKeyMismatch queues m as a HOST_KEY_MISMATCH event, reported
// by this peer as its source; like Record it never blocks, and an event
// management would refuse (no target, no port, equal fingerprints) is
// not queued.
func (r *Reporter) RecordHostKeyMismatch(m HostKeyMismatch) {
	if !m.Target.IsValid() || m.Port == 0 || m.Presented == "" || m.Presented == m.Expected ||
		len(m.Presented) > maxFingerprint || len(m.Expected) > maxFingerprint {
		return
	}
	ev := &mgmtpb.WiremeshSSHEvent{Type: mgmtpb.WiremeshSSHEvent_HOST_KEY_MISMATCH, At: timestamppb.New(m.At),
		TargetIp: m.Target.Unmap().WithZone("").String(), TargetPort: uint32(m.Port),
		PresentedKeyFingerprint: m.Presented, ExpectedKeyFingerprint: m.Expected}
	if unixuser.Valid(m.User) {
		ev.UnixUser = m.User
	}
	r.enqueue(ev)
}

// Stats reports the events queued and those lost in all (dropped from a
// full queue or refused by management).
func (r *Reporter) Stats() (queued int, lost uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue), r.lost
}

// Run sends at every tick until ctx ends.
func (r *Reporter) Run(ctx context.Context, ticks <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		r.Tick(ctx)
	}
}

// Tick sends what is queued, a few batches at most, unless a failure
// asked to wait: after one, it waits a number of ticks that doubles with
// each failure in a row (up to 64).
func (r *Reporter) Tick(ctx context.Context) {
	if r.wait > 0 {
		r.wait--
		return
	}
	for range maxBatchesPerTick {
		req, last, dropped := r.batch()
		if req == nil {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, sendTimeout)
		err := r.o.Send(cctx, req)
		cancel()
		if err != nil {
			r.failed(err, last, len(req.Events))
			return
		}
		r.backoff = 0
		r.sent(last, dropped)
	}
}

// batch is the oldest events, up to MaxBatch, with the drop count; nil
// when there is nothing to say.
func (r *Reporter) batch() (*mgmtpb.WiremeshSSHEventsRequest, uint64, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.off || (len(r.queue) == 0 && r.dropped == 0) {
		return nil, 0, 0
	}
	n := min(len(r.queue), MaxBatch)
	req := &mgmtpb.WiremeshSSHEventsRequest{Events: make([]*mgmtpb.WiremeshSSHEvent, n), Dropped: r.dropped}
	last := r.seq
	for i, q := range r.queue[:n] {
		req.Events[i] = q.ev
		last = q.seq
	}
	return req, last, r.dropped
}

// sent removes the events up to seq last (those not dropped meanwhile)
// and the drops management was told of.
func (r *Reporter) sent(last, dropped uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removeThrough(last)
	r.dropped -= min(dropped, r.dropped)
}

func (r *Reporter) removeThrough(last uint64) (removed int) {
	i := 0
	for i < len(r.queue) && r.queue[i].seq <= last {
		r.bytes -= r.queue[i].size
		r.queue[i] = queued{}
		i++
	}
	r.queue = r.queue[i:]
	return i
}

// failed decides what a refused report means.
func (r *Reporter) failed(err error, last uint64, n int) {
	switch status.Code(err) {
	case codes.Unimplemented:
		// A NetBird server (or ours with reports off): nothing to send
		// it, for this run.
		r.mu.Lock()
		r.off, r.queue, r.bytes, r.dropped = true, nil, 0, 0
		r.mu.Unlock()
		r.log.Debug("management does not take SSH event reports; not sending them", "err", err)
		return
	case codes.InvalidArgument:
		// Management will never take this batch (an event out of its
		// bounds, a clock far off): it is lost, and told as dropped.
		r.mu.Lock()
		k := r.removeThrough(last)
		r.dropped += uint64(k)
		r.lost += uint64(k)
		r.mu.Unlock()
		r.log.Warn("management refused SSH events; they are lost", "events", n, "err", err)
		return
	}
	r.backoff = min(max(1, 2*r.backoff), maxBackoffTicks)
	r.wait = r.backoff
	r.log.Debug("sending SSH events", "err", err, "retry_in_ticks", r.backoff)
}

// wireEvent converts e at the boundary, bounding and cleaning what the
// client chose (the user it asked for, a forward's target) so management
// takes it; nil for an event without a source.
func wireEvent(e sshserver.Event) *mgmtpb.WiremeshSSHEvent {
	if !e.Source.IsValid() {
		return nil
	}
	ev := &mgmtpb.WiremeshSSHEvent{SourceIp: e.Source.Unmap().WithZone("").String(), At: timestamppb.New(e.At), SessionId: e.Session, Pty: e.PTY}
	switch e.Type {
	case sshserver.SessionStart:
		ev.Type = mgmtpb.WiremeshSSHEvent_SESSION_START
	case sshserver.SessionEnd:
		ev.Type = mgmtpb.WiremeshSSHEvent_SESSION_END
		ev.DurationMillis = uint64(max(e.Duration, 0).Milliseconds())
	case sshserver.Refused:
		ev.Type = mgmtpb.WiremeshSSHEvent_REFUSED
		ev.Reason = clean(e.Reason, maxReason, false)
		if ev.Reason == "" {
			ev.Reason = "refused"
		}
	default:
		return nil
	}
	switch e.Kind {
	case sshserver.KindShell:
		ev.Kind = mgmtpb.WiremeshSSHEvent_SHELL
	case sshserver.KindExec:
		ev.Kind = mgmtpb.WiremeshSSHEvent_EXEC
	case sshserver.KindSFTP:
		ev.Kind = mgmtpb.WiremeshSSHEvent_SFTP
	case sshserver.KindLocalForward:
		ev.Kind = mgmtpb.WiremeshSSHEvent_LOCAL_FORWARD
		ev.Forward = clean(e.Forward, maxForward, true)
	case sshserver.KindRemoteForward:
		ev.Kind = mgmtpb.WiremeshSSHEvent_REMOTE_FORWARD
		ev.Forward = clean(e.Forward, maxForward, true)
	}
	if ev.Kind == mgmtpb.WiremeshSSHEvent_KIND_UNKNOWN && ev.Type != mgmtpb.WiremeshSSHEvent_REFUSED {
		return nil
	}
	if unixuser.Valid(e.User) {
		ev.UnixUser = e.User
	}
	ev.JwtUser = clean(e.JWTUser, maxJWTUser, true)
	return ev
}

// clean makes s printable UTF-8 of at most n bytes: other runes (and
// spaces, if noSpace) become '?', and a longer string is cut at a rune.
func clean(s string, n int, noSpace bool) string {
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) || (noSpace && r == ' ') {
			r = '?'
		}
		if b.Len()+utf8.RuneLen(r) > n {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

package daemon

import (
	"bytes"
	"context"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/client/sshaudit"
	"github.com/wiremesh/wiremesh/client/sshclient"
	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// Bounds of host key mismatch reports: each local user (by the socket's
// peer credentials) gets mismatchBurst at once, then one per
// mismatchEvery; all users but root together mismatchTotal per
// mismatchWindow. Management limits this peer's events again
// (management/sshaudit); these keep one local user from filling the
// agent's event queue and pushing the SSH server's own refusals out of
// it. Root is held only to its own bucket: `netbird ssh` runs as root (it
// reads the peer's key), so the total must not let another local user
// silence it.
const (
	mismatchBurst   = 10
	mismatchEvery   = 6 * time.Second // 10 a minute
	mismatchTotal   = 60
	mismatchWindow  = time.Minute
	mismatchCallers = 256 // local users remembered
	maxReportedUser = 256 // bytes of the user name read at all
)

// ReportSSHHostKeyMismatch takes `netbird ssh`'s word that the SSH server
// at a peer's overlay address presented another host key than the map
// gives for that peer, and queues an audit event (HOST_KEY_MISMATCH,
// reported by this peer as the source) for management's activity log.
//
// Any local user may call it, not only root: the CLI runs as whoever
// typed it, and the only effect is an event that says "this peer's
// client saw a wrong host key at that peer" - attributed to this peer,
// reported_by this peer, as the machine's own users saw it - which
// grants nothing and changes no state. The daemon still checks what it
// can: the address must be a peer of its map, the port one its agent's
// SSH server listens on (22, 22022), the expected key is taken
// from its own map (not from the caller) and must differ from the key
// presented, and callers are limited per user and in all.
func (s *Server) ReportSSHHostKeyMismatch(ctx context.Context, req *daemonpb.ReportSSHHostKeyMismatchRequest) (*daemonpb.ReportSSHHostKeyMismatchResponse, error) {
	uid, ok := callerUID(ctx)
	if !ok {
		return nil, status.Error(codes.PermissionDenied, "host key mismatch reports are taken only through the daemon socket")
	}
	// Every call is charged, refused ones too: looking the peer up reads
	// the engine's status (WireGuard's counters), which a caller should
	// not get for free.
	if !s.mismatches.take(uid) {
		return nil, status.Errorf(codes.ResourceExhausted, "too many host key mismatch reports: at most %d a minute per user, %d in all for users other than root", int(time.Minute/mismatchEvery), mismatchTotal)
	}
	ip, err := netip.ParseAddr(req.GetPeerIp())
	if err != nil || ip.Zone() != "" {
		return nil, status.Errorf(codes.InvalidArgument, "peer_ip %q is not an IP address", truncate(req.GetPeerIp(), 64))
	}
	ip = ip.Unmap()
	if req.GetPort() > 65535 || !sshclient.MeshPort(int(req.GetPort())) {
		// Any other port is some other SSH server, with its own key:
		// no forgery of the map's.
		return nil, status.Errorf(codes.InvalidArgument, "port %d is not an SSH port of the peer's agent (%d or %d): only its host key is in the network map",
			req.GetPort(), sshserver.Port, sshserver.InternalPort)
	}
	if len(req.GetUnixUser()) > maxReportedUser {
		return nil, status.Errorf(codes.InvalidArgument, "unix_user is longer than %d bytes", maxReportedUser)
	}
	presented, err := ssh.ParsePublicKey(req.GetPresentedHostKey())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "presented_host_key is not an SSH public key in wire form: %v", err)
	}
	s.mu.Lock()
	e := s.eng
	s.mu.Unlock()
	if e == nil {
		return nil, status.Error(codes.FailedPrecondition, "netbird is not up: there is no network map to check the peer against")
	}
	var mapKey []byte
	found := false
	for _, p := range e.Status().Peers {
		if p.IP == ip.String() || (p.IPv6 != "" && p.IPv6 == ip.String()) {
			mapKey, found = p.SSHHostKey, true
			break
		}
	}
	if !found {
		return nil, status.Errorf(codes.InvalidArgument, "peer_ip %s is no peer in this peer's network map", ip)
	}
	expected, err := sshserver.ParsePeerKey(mapKey)
	if err != nil || expected == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "peer %s has no usable SSH key in the network map: nothing to compare with", ip)
	}
	if bytes.Equal(presented.Marshal(), expected.Marshal()) {
		return nil, status.Errorf(codes.InvalidArgument, "presented_host_key is the key the network map gives for %s: no mismatch", ip)
	}
	m := sshaudit.HostKeyMismatch{Target: ip, Port: uint16(req.GetPort()), User: req.GetUnixUser(),
		Presented: ssh.FingerprintSHA256(presented), Expected: ssh.FingerprintSHA256(expected), At: s.mismatches.now()}
	e.RecordSSHHostKeyMismatch(m)
	s.log.Warn("SSH host key mismatch reported by netbird ssh", "peer", ip, "port", m.Port, "user", m.User,
		"presented", m.Presented, "expected", m.Expected, "uid", uid)
	return &daemonpb.ReportSSHHostKeyMismatchResponse{}, nil
}

// callerUID is the user on the other end of the daemon socket.
func callerUID(ctx context.Context) (uint32, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return 0, false
	}
	pc, ok := p.AuthInfo.(peerCred)
	return pc.UID, ok
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// reportLimiter bounds reports per caller (token buckets) and in all (a
// fixed window). Safe for concurrent use.
type reportLimiter struct {
	now func() time.Time

	mu          sync.Mutex
	buckets     map[uint32]*bucket
	windowStart time.Time
	inWindow    int
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newReportLimiter(now func() time.Time) *reportLimiter {
	if now == nil {
		now = time.Now
	}
	return &reportLimiter{now: now, buckets: map[uint32]*bucket{}}
}

// take spends one report of uid, or reports that it is over a bound.
// Root (uid 0) is not counted in, nor held to, the total.
func (l *reportLimiter) take(uid uint32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Sub(l.windowStart) >= mismatchWindow || now.Before(l.windowStart) {
		l.windowStart, l.inWindow = now, 0
	}
	root := uid == 0
	if !root && l.inWindow >= mismatchTotal {
		return false
	}
	b, ok := l.buckets[uid]
	if !ok {
		// Root always finds room (the table holds one more at most).
		if !root && len(l.buckets) >= mismatchCallers {
			l.forgetFull(now)
			if len(l.buckets) >= mismatchCallers {
				return false
			}
		}
		b = &bucket{tokens: mismatchBurst, at: now}
		l.buckets[uid] = b
	}
	if el := now.Sub(b.at); el > 0 {
		b.tokens = min(mismatchBurst, b.tokens+float64(el)/float64(mismatchEvery))
	}
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	if !root {
		l.inWindow++
	}
	return true
}

// forgetFull drops the buckets that have refilled: forgetting them
// changes nothing for their users.
func (l *reportLimiter) forgetFull(now time.Time) {
	for uid, b := range l.buckets {
		if b.tokens+float64(now.Sub(b.at))/float64(mismatchEvery) >= mismatchBurst {
			delete(l.buckets, uid)
		}
	}
}

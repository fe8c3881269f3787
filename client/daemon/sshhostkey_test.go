package daemon

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/client/engine"
	"github.com/wiremesh/wiremesh/client/sshaudit"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// RecordSSHHostKeyMismatch: the route tests' stand-in records nothing.
func (f *fakeEngine) RecordSSHHostKeyMismatch(sshaudit.HostKeyMismatch) {}

// mismatchEngine is a session whose map has peers with SSH keys, and
// keeps the mismatches queued.
type mismatchEngine struct {
	*fakeEngine
	peers []engine.PeerStatus

	mu          sync.Mutex
	got         []sshaudit.HostKeyMismatch
	statusCalls int
}

func (m *mismatchEngine) Status() engine.Status {
	m.mu.Lock()
	m.statusCalls++
	m.mu.Unlock()
	return engine.Status{MgmtConnected: true, Peers: m.peers}
}

func (m *mismatchEngine) statusRead() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.statusCalls
}

func (m *mismatchEngine) RecordSSHHostKeyMismatch(h sshaudit.HostKeyMismatch) {
	m.mu.Lock()
	m.got = append(m.got, h)
	m.mu.Unlock()
}

func (m *mismatchEngine) recorded() []sshaudit.HostKeyMismatch {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]sshaudit.HostKeyMismatch(nil), m.got...)
}

func newSSHKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestReportSSHHostKeyMismatch: netbird ssh's report of a forged host key
// is taken from any local user through the socket, only for a peer of
// the map with an SSH key there, only when the key presented is not the
// map's, only for the agent's SSH ports (22, 22022: any other port is
// another server with its own key), and queued with both fingerprints
// (the expected one from the daemon's own map); a user past 10 at once,
// or all users but root past 60 a minute, are refused, refused calls
// counting too (and refused before the engine's status is read); nothing
// is queued for a refused report.
func TestReportSSHHostKeyMismatch(t *testing.T) {
	ctx := context.Background()
	as := func(uid uint32) context.Context {
		return peer.NewContext(ctx, &peer.Peer{AuthInfo: peerCred{UID: uid}})
	}
	mapKey, forged := newSSHKey(t), newSSHKey(t)
	s := New("test", slog.New(slog.DiscardHandler), Options{StateDir: t.TempDir()})
	clock := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	s.mismatches = newReportLimiter(func() time.Time { return clock })
	req := func() *daemonpb.ReportSSHHostKeyMismatchRequest {
		return &daemonpb.ReportSSHHostKeyMismatchRequest{PeerIp: "100.64.0.7", Port: 22, UnixUser: "alice", PresentedHostKey: forged.Marshal()}
	}
	if _, err := s.ReportSSHHostKeyMismatch(as(1000), req()); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "not up") {
		t.Fatalf("no session: %v", err)
	}
	eng := &mismatchEngine{fakeEngine: &fakeEngine{}, peers: []engine.PeerStatus{
		{FQDN: "db.netbird.cloud", IP: "100.64.0.7", IPv6: "fd00:1::7", SSHHostKey: ssh.MarshalAuthorizedKey(mapKey)},
		{FQDN: "nokey.netbird.cloud", IP: "100.64.0.8"},
	}}
	s.eng = eng

	uid := uint32(500)
	for name, tc := range map[string]struct {
		ctx  context.Context
		mut  func(*daemonpb.ReportSSHHostKeyMismatchRequest)
		code codes.Code
		says string
	}{
		"no socket credentials": {ctx, func(*daemonpb.ReportSSHHostKeyMismatchRequest) {}, codes.PermissionDenied, "daemon socket"},
		"not an address":        {as(1000), func(r *daemonpb.ReportSSHHostKeyMismatchRequest) { r.PeerIp = "db" }, codes.InvalidArgument, "peer_ip"},
		"zoned address":         {as(1000), func(r *daemonpb.ReportSSHHostKeyMismatchRequest) { r.PeerIp = "fe80::1%eth0" }, codes.InvalidArgument, "peer_ip"},
		"not in the map":        {as(1000), func(r *daemonpb.ReportSSHHostKeyMismatchRequest) { r.PeerIp = "100.64.0.99" }, codes.InvalidArgument, "no peer in this peer's network map"},
		"no key in the map":     {as(1000), func(r *daemonpb.ReportSSHHostKeyMismatchRequest) { r.PeerIp = "100.64.0.8" }, codes.FailedPrecondition, "no usable SSH key"},
		"no port":               {as(1000), func(r *daemonpb.ReportSSHHostKeyMismatchRequest) { r.Port = 0 }, codes.InvalidArgument, "port"},
		"port out of range":     {as(1000), func(r *daemonpb.ReportSSHHostKeyMismatchRequest) { r.Port = 70000 }, codes.InvalidArgument, "port"},
		"another port":          {as(1000), func(r *daemonpb.ReportSSHHostKeyMismatchRequest) { r.Port = 2222 }, codes.InvalidArgument, "port 2222 is not an SSH port of the peer's agent (22 or 22022)"},
		"port 22 + 65536":       {as(1000), func(r *daemonpb.ReportSSHHostKeyMismatchRequest) { r.Port = 65536 + 22 }, codes.InvalidArgument, "port"},
		"garbage key":           {as(1000), func(r *daemonpb.ReportSSHHostKeyMismatchRequest) { r.PresentedHostKey = []byte("ssh-ed25519 AAAA") }, codes.InvalidArgument, "presented_host_key"},
		"the map's own key":     {as(1000), func(r *daemonpb.ReportSSHHostKeyMismatchRequest) { r.PresentedHostKey = mapKey.Marshal() }, codes.InvalidArgument, "no mismatch"},
		"user too long":         {as(1000), func(r *daemonpb.ReportSSHHostKeyMismatchRequest) { r.UnixUser = strings.Repeat("u", 300) }, codes.InvalidArgument, "unix_user"},
	} {
		r := req()
		tc.mut(r)
		if tc.ctx != ctx {
			// Each its own user: refused calls are charged too.
			uid++
			tc.ctx = as(uid)
		}
		_, err := s.ReportSSHHostKeyMismatch(tc.ctx, r)
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: got %v, want %v saying %q", name, err, tc.code, tc.says)
		}
	}
	if got := eng.recorded(); len(got) != 0 {
		t.Fatalf("refused reports queued %v", got)
	}
	clock = clock.Add(time.Minute) // a new window for the total

	// Refused calls cost as good ones, and past the bound the engine's
	// status is no longer read.
	notInMap := req()
	notInMap.PeerIp = "100.64.0.99"
	for i := range mismatchBurst {
		if _, err := s.ReportSSHHostKeyMismatch(as(4000), notInMap); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("refused report %d: %v", i+1, err)
		}
	}
	reads := eng.statusRead()
	if _, err := s.ReportSSHHostKeyMismatch(as(4000), req()); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("after %d refused reports: %v, want ResourceExhausted", mismatchBurst, err)
	}
	if eng.statusRead() != reads {
		t.Fatal("a call over the bound read the engine's status")
	}
	clock = clock.Add(time.Minute)

	// A good report, from an unprivileged user, by the IPv6 address too.
	if _, err := s.ReportSSHHostKeyMismatch(as(1000), req()); err != nil {
		t.Fatal(err)
	}
	r6 := req()
	r6.PeerIp, r6.Port = "fd00:1::7", 22022
	if _, err := s.ReportSSHHostKeyMismatch(as(1000), r6); err != nil {
		t.Fatal(err)
	}
	got := eng.recorded()
	want := sshaudit.HostKeyMismatch{Port: 22, User: "alice", Presented: ssh.FingerprintSHA256(forged), Expected: ssh.FingerprintSHA256(mapKey), At: clock}
	if len(got) != 2 || got[0].Target.String() != "100.64.0.7" || got[1].Target.String() != "fd00:1::7" || got[1].Port != 22022 {
		t.Fatalf("queued %+v", got)
	}
	got[0].Target = want.Target
	if got[0] != want {
		t.Fatalf("queued %+v, want %+v", got[0], want)
	}

	// Per user: 10 at once (2 spent), then one per 6 s.
	for i := range 8 {
		if _, err := s.ReportSSHHostKeyMismatch(as(1000), req()); err != nil {
			t.Fatalf("report %d: %v", i+3, err)
		}
	}
	if _, err := s.ReportSSHHostKeyMismatch(as(1000), req()); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("11th report at once: %v, want ResourceExhausted", err)
	}
	clock = clock.Add(6 * time.Second)
	if _, err := s.ReportSSHHostKeyMismatch(as(1000), req()); err != nil {
		t.Fatalf("after 6 s: %v", err)
	}
	// In all: 60 a minute, whoever asks (11 spent in this window).
	n := 0
	for uid := uint32(2000); uid < 2010; uid++ {
		for range 10 {
			if _, err := s.ReportSSHHostKeyMismatch(as(uid), req()); err == nil {
				n++
			} else if status.Code(err) != codes.ResourceExhausted {
				t.Fatal(err)
			}
		}
	}
	if n != 60-11 {
		t.Fatalf("%d more reports taken in the minute, want %d", n, 60-11)
	}
	if got := len(eng.recorded()); got != 60 {
		t.Fatalf("%d queued, want 60", got)
	}
	// Root is held to its own 10 at once, not to the total, nor does it
	// count in it: `netbird ssh` runs as root, and no other local user
	// can silence it.
	for i := range mismatchBurst {
		if _, err := s.ReportSSHHostKeyMismatch(as(0), req()); err != nil {
			t.Fatalf("root's report %d with the total spent: %v", i+1, err)
		}
	}
	if _, err := s.ReportSSHHostKeyMismatch(as(0), req()); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("root's 11th report at once: %v, want ResourceExhausted", err)
	}
	if _, err := s.ReportSSHHostKeyMismatch(as(3001), req()); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("another user with the total spent: %v, want ResourceExhausted", err)
	}
	clock = clock.Add(time.Minute)
	if _, err := s.ReportSSHHostKeyMismatch(as(3000), req()); err != nil {
		t.Fatalf("next minute: %v", err)
	}
	// Root's reports of the last minute do not count in this one's.
	n = 0
	for uid := uint32(5000); uid < 5010; uid++ {
		for range 10 {
			if _, err := s.ReportSSHHostKeyMismatch(as(uid), req()); err == nil {
				n++
			}
		}
	}
	if n != 60-1 {
		t.Fatalf("%d reports taken in the minute after root's, want %d", n, 60-1)
	}
}

// TestReportLimiterCallersBounded: the table of local users stays
// bounded; users whose allowance refilled are forgotten to make room.
func TestReportLimiterCallersBounded(t *testing.T) {
	clock := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	l := newReportLimiter(func() time.Time { return clock })
	// The total (60 a minute) keeps real callers from filling the table
	// in a minute: users who spent their whole allowance, as after many
	// minutes of reports.
	for uid := range uint32(mismatchCallers) {
		l.buckets[uid+1] = &bucket{tokens: 0, at: clock}
	}
	if l.take(99999) {
		t.Fatal("a new user got in with the table full of users still refilling")
	}
	if !l.take(0) {
		t.Fatal("root found no room in a full table")
	}
	clock = clock.Add(mismatchBurst * mismatchEvery)
	if !l.take(99999) {
		t.Fatal("refilled users were not forgotten")
	}
	if len(l.buckets) > mismatchCallers+1 { // root's on top
		t.Fatalf("%d buckets, bound %d", len(l.buckets), mismatchCallers)
	}
}

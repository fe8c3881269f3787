package sshserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// Limits that keep a single peer, or anything able to reach the overlay
// address, from exhausting the agent. Unauthenticated connections are
// the cheapest to open, so they are capped globally and per source.
const (
	maxPreAuth          = 32
	maxPreAuthPerSource = 4
	maxConnsPerPeer     = 10
	maxSessionsPerConn  = 10
	maxForwardsPerConn  = 10 // -R listeners
	maxStreamsPerConn   = 64 // open -L and -R streams together
	handshakeTimeout    = 20 * time.Second
)

// Options configure a Server.
type Options struct {
	HostKey ssh.Signer
	Log     *slog.Logger
	// Overlay is the mesh's address range: connections from any other
	// source are closed before the handshake. The firewall filters only
	// the WireGuard interface, and a LAN neighbour can reach the overlay
	// address with its own source address (weak host model). An invalid
	// prefix lets no one in.
	Overlay netip.Prefix
	// AllowRoot lets clients log in as root (netbird up
	// --enable-ssh-root); off by default, as NetBird's.
	AllowRoot bool
	// AllowLocalForwarding and AllowRemoteForwarding allow ssh -L and
	// ssh -R (--enable-ssh-local-port-forwarding and
	// --enable-ssh-remote-port-forwarding); off by default, as NetBird's.
	// Forwarded streams are dialled and listened for by the agent itself,
	// not as the logged-in user.
	AllowLocalForwarding  bool
	AllowRemoteForwarding bool
	// DeniedUsers are local users no one may log in as.
	DeniedUsers []string
	// Passwd and Shadow are where login shells and account states are
	// read ("": /etc/passwd and /etc/shadow).
	Passwd, Shadow string
	// Now is the clock account expiry is judged by (nil: time.Now).
	Now func() time.Time
	// Audit, if set, learns of every session started and ended and
	// every login or channel refused (for management's activity log).
	// It is called from the sessions' goroutines and must not block.
	Audit func(Event)
	// SFTPCommand is the program and arguments that serve the sftp
	// subsystem on stdin and stdout, started as the session's user like
	// any command: the agent's own binary with SFTPArg (pkg/sftp).
	// Empty: OpenSSH's sftp-server, if one is installed.
	SFTPCommand []string
	// SFTPServers are the paths tried for OpenSSH's sftp-server when
	// SFTPCommand is empty (nil: the usual places of Debian, Fedora and
	// Arch).
	SFTPServers []string
}

// Server serves SSH sessions to the mesh's peers. Every goroutine it
// starts ends by Close.
type Server struct {
	o      Options
	log    *slog.Logger
	refuse *logLimiter // refusals a stranger can trigger at will
	access atomic.Pointer[Access]
	// sessionSeq numbers audited sessions (audit.go).
	sessionSeq atomic.Uint64
	// refusals bounds Refused events per source (auditlimit.go).
	refusals *refusalLimiter

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	lns    []net.Listener
	raw    map[net.Conn]bool  // connections still in the handshake: true if a no-policy slot
	perSrc map[netip.Addr]int // of raw in the shared slots, by source
	// noPolicy are the connections of raw from map peers no policy lets
	// in, kept out of the shared slots; toldAt when each such source
	// was last admitted (policy.go).
	noPolicy map[netip.Addr]int
	toldAt   map[netip.Addr]time.Time
	conns    map[*conn]struct{}
	closed   bool
}

// New creates a server that serves nothing until Serve.
func New(o Options) *Server {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Passwd == "" {
		o.Passwd = "/etc/passwd"
	}
	if o.Shadow == "" {
		o.Shadow = "/etc/shadow"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{o: o, log: o.Log, refuse: newLogLimiter(o.Log, o.Now), refusals: newRefusalLimiter(o.Now), ctx: ctx, cancel: cancel,
		raw: map[net.Conn]bool{}, perSrc: map[netip.Addr]int{}, noPolicy: map[netip.Addr]int{}, toldAt: map[netip.Addr]time.Time{},
		conns: map[*conn]struct{}{}}
}

// SetAccess replaces what the network map allows and decides again for
// every open connection: those whose peer the new map no longer lets in
// are closed with their sessions and forwards.
func (s *Server) SetAccess(a *Access) {
	s.access.Store(a)
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		if err := c.stillAllowed(); err != nil {
			s.log.Info("ssh connection closed: access revoked", "peer", c.peer, "ip", c.ip, "user", c.acc.Name, "reason", err)
			s.auditRefusal(c.event(Event{Type: Refused, Reason: "access revoked, connection closed: " + err.Error()}))
			_ = c.sc.Close()
		}
	}
}

// Listen listens on addr:port (the overlay address) and serves it.
func (s *Server) Listen(addr netip.Addr, port uint16) error {
	ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, port).String())
	if err != nil {
		return fmt.Errorf("SSH server: %w", err)
	}
	s.Serve(ln)
	return nil
}

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ln.Close()
		return
	}
	s.lns = append(s.lns, ln)
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !s.admit(c) {
				_ = c.Close()
				continue
			}
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.handle(c) }()
		}
	}()
}

// admit decides, before any SSH byte is read, whether c may start a
// handshake: it comes from the overlay and the pre-authentication limits
// leave room. A map peer no policy lets in is held to limits of its own
// (admitNoPolicy). An admitted connection is tracked until release.
func (s *Server) admit(c net.Conn) bool {
	from := addrOf(c.RemoteAddr())
	if !s.o.Overlay.IsValid() || !s.o.Overlay.Contains(from) {
		s.refuse.warn("ssh connection dropped: source outside the mesh", "from", from, "overlay", s.o.Overlay)
		return false
	}
	refusal := s.access.Load().policyRefusal(from)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if refusal != nil {
		return s.admitNoPolicy(c, from, refusal)
	}
	switch {
	case len(s.raw)-s.noPolicyTotal() >= maxPreAuth:
		s.refuse.warn("ssh connection dropped: too many unauthenticated connections", "from", from, "limit", maxPreAuth)
		return false
	case s.perSrc[from] >= maxPreAuthPerSource:
		s.refuse.warn("ssh connection dropped: too many unauthenticated connections from this source", "from", from, "limit", maxPreAuthPerSource)
		return false
	}
	s.raw[c] = false
	s.perSrc[from]++
	return true
}

// release stops tracking a connection admit let in.
func (s *Server) release(c net.Conn) {
	from := addrOf(c.RemoteAddr())
	s.mu.Lock()
	defer s.mu.Unlock()
	noPolicy, ok := s.raw[c]
	if !ok {
		return
	}
	delete(s.raw, c)
	count := s.perSrc
	if noPolicy {
		count = s.noPolicy
	}
	if count[from]--; count[from] <= 0 {
		delete(count, from)
	}
}

// Close stops listening, ends every connection (those still in the
// handshake too) with its sessions and forwards, and waits for them. It
// must not be called with a lock the server's callers take elsewhere
// held: it waits for sessions to end.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	lns, raw, conns := s.lns, s.raw, s.conns
	s.lns, s.raw, s.conns = nil, map[net.Conn]bool{}, map[*conn]struct{}{}
	s.perSrc, s.noPolicy = map[netip.Addr]int{}, map[netip.Addr]int{}
	s.mu.Unlock()
	s.cancel()
	for _, ln := range lns {
		_ = ln.Close()
	}
	for c := range raw {
		_ = c.Close()
	}
	for c := range conns {
		_ = c.sc.Close()
	}
	s.wg.Wait()
}

// permission extension keys carrying the authorized peer; the resolved
// local account travels in ExtraData.
const (
	extPeer    = "wiremesh-peer"
	extIP      = "wiremesh-peer-ip"
	extKey     = "wiremesh-peer-key"
	extUser    = "wiremesh-jwt-user" // the token's user, for a token login
	extAccount = "wiremesh-account"
)

func (s *Server) config(c net.Conn) *ssh.ServerConfig {
	policy := s.policyCheck(c)
	cfg := &ssh.ServerConfig{
		// Clients start with "none": a peer no policy lets in learns why
		// at once, whatever keys it has (policy.go).
		NoClientAuth: true,
		NoClientAuthCallback: func(md ssh.ConnMetadata) (*ssh.Permissions, error) {
			if err := policy(md); err != nil {
				return nil, err
			}
			return nil, errAuthRequired
		},
		// The peer and the local user are both decided here, once: no
		// channel of any type runs for a connection that did not pass.
		PublicKeyCallback: func(md ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if err := policy(md); err != nil {
				return nil, err
			}
			from := addrOf(md.RemoteAddr())
			p, err := s.access.Load().Authorize(k, from)
			if err != nil {
				s.refuse.warn("ssh login refused", "from", from, "user", md.User(), "reason", err)
				return nil, err
			}
			acc, err := lookupUser(md.User(), s.o)
			if err != nil {
				s.refuse.warn("ssh login refused", "peer", p.Name, "from", from, "user", md.User(), "reason", err)
				// The peer is authorized: it is told why, in a banner.
				return nil, &ssh.BannerError{Err: err, Message: err.Error() + "\n"}
			}
			return &ssh.Permissions{
				Extensions: map[string]string{extPeer: p.Name, extIP: p.IP.String(), extKey: string(k.Marshal())},
				ExtraData:  map[any]any{extAccount: acc},
			}, nil
		},
		ServerVersion: "SSH-2.0-wiremesh",
	}
	if a := s.access.Load(); a != nil && a.JWT != nil {
		// NetBird's clients log in with a token only when the version
		// says so; ours keep logging in with their key.
		cfg.ServerVersion = "SSH-2.0-" + netbirdServerID + "-wiremesh " + jwtMarker
		cfg.PasswordCallback = func(md ssh.ConnMetadata, password []byte) (*ssh.Permissions, error) {
			if err := policy(md); err != nil {
				return nil, err
			}
			return s.tokenLogin(md, password)
		}
	}
	cfg.AddHostKey(s.o.HostKey)
	return cfg
}

// tokenLogin is NetBird's JWT login: the password is the token.
func (s *Server) tokenLogin(md ssh.ConnMetadata, password []byte) (*ssh.Permissions, error) {
	from := addrOf(md.RemoteAddr())
	p, id, err := s.access.Load().authorizeToken(s.ctx, string(password), from, md.User())
	if err != nil {
		s.refuse.warn("ssh token login refused", "from", from, "user", md.User(), "reason", err)
		return nil, err
	}
	acc, err := lookupUser(md.User(), s.o)
	if err != nil {
		s.refuse.warn("ssh login refused", "peer", p.Name, "from", from, "user", md.User(), "jwt_user", id, "reason", err)
		return nil, &ssh.BannerError{Err: err, Message: err.Error() + "\n"}
	}
	return &ssh.Permissions{
		Extensions: map[string]string{extPeer: p.Name, extIP: p.IP.String(), extUser: id},
		ExtraData:  map[any]any{extAccount: acc},
	}, nil
}

func addrOf(a net.Addr) netip.Addr {
	if t, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(t.IP)
		return ip.Unmap()
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap.Addr().Unmap()
}

func (s *Server) handle(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(s.handshakeTimeout(c)))
	cfg := s.config(c)
	var refused refusal
	watchRefusals(cfg, &refused)
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	s.release(c)
	if err != nil {
		_ = c.Close()
		s.auditRefused(addrOf(c.RemoteAddr()), &refused)
		return
	}
	_ = c.SetDeadline(time.Time{})
	acc, _ := sc.Permissions.ExtraData[extAccount].(account)
	jwtUser := sc.Permissions.Extensions[extUser]
	var key ssh.PublicKey
	var kerr error
	if jwtUser == "" {
		key, kerr = ssh.ParsePublicKey([]byte(sc.Permissions.Extensions[extKey]))
	}
	ip, ierr := netip.ParseAddr(sc.Permissions.Extensions[extIP])
	if acc.Name == "" || kerr != nil || ierr != nil {
		_ = sc.Close() // not reached: the callbacks always set them
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	cs := &conn{s: s, sc: sc, ctx: ctx, acc: acc, key: key, jwtUser: jwtUser, ipAddr: ip, peer: sc.Permissions.Extensions[extPeer], ip: ip.String()}
	if !s.register(cs) {
		_ = sc.Close()
		return
	}
	defer func() {
		s.mu.Lock()
		delete(s.conns, cs)
		s.mu.Unlock()
		_ = sc.Close()
	}()
	// Access may have been revoked between the callback and register,
	// which SetAccess would have missed.
	if err := cs.stillAllowed(); err != nil {
		return
	}
	s.log.Info("ssh connection", "peer", cs.peer, "ip", cs.ip, "user", acc.Name, "jwt_user", jwtUser)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); cs.globalRequests(reqs) }()
	go func() {
		// The connection's end, whoever ends it, ends every channel and
		// forwarded socket of it.
		defer wg.Done()
		_ = sc.Wait()
		cancel()
	}()
	cs.channels(chans)
	_ = sc.Close()
	wg.Wait()
	// After globalRequests returned: no forward can be added any more.
	cs.closeForwards()
	cs.wg.Wait()
	cs.auditForwardsEnd()
	cs.auditRefusalsEnd()
}

// register adds c to the open connections unless the server is closing
// or its peer already holds maxConnsPerPeer.
func (s *Server) register(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	n := 0
	for o := range s.conns {
		if o.ipAddr == c.ipAddr {
			n++
		}
	}
	if n >= maxConnsPerPeer {
		s.refuse.warn("ssh connection refused: too many connections from this peer", "peer", c.peer, "ip", c.ip, "limit", maxConnsPerPeer)
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

// logLimiter lets through a burst of warnings per minute and counts the
// rest, so a stranger knocking at the port cannot flood the log.
type logLimiter struct {
	log *slog.Logger
	now func() time.Time

	mu         sync.Mutex
	window     time.Time
	n, dropped int
}

const logBurst = 10

func newLogLimiter(log *slog.Logger, now func() time.Time) *logLimiter {
	return &logLimiter{log: log, now: now}
}

func (l *logLimiter) warn(msg string, args ...any) {
	l.mu.Lock()
	now := l.now()
	if now.Sub(l.window) >= time.Minute {
		if l.dropped > 0 {
			args = append(args, "suppressed_before", l.dropped)
		}
		l.window, l.n, l.dropped = now, 0, 0
	}
	if l.n >= logBurst {
		l.dropped++
		l.mu.Unlock()
		return
	}
	l.n++
	l.mu.Unlock()
	l.log.Warn(msg, args...)
}

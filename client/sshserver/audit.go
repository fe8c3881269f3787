package sshserver

import (
	"errors"
	"net/netip"
	"time"

	"golang.org/x/crypto/ssh"
)

// EventType is what happened, for the activity log.
type EventType uint8

// Event types.
const (
	SessionStart EventType = iota + 1
	SessionEnd
	Refused
)

// SessionKind is what a session ran.
type SessionKind uint8

// Session kinds; KindNone for a refusal before any channel.
const (
	KindNone SessionKind = iota
	KindShell
	KindExec
	KindSFTP
	KindLocalForward  // ssh -L, one per target and connection
	KindRemoteForward // ssh -R, one per listener
)

// Event is one access to this server (Options.Audit): who (Source, the
// overlay address), as which local user, what, and when. The strings
// come from the client in part (the user asked for, a forward's target):
// whoever sends them on bounds and cleans them.
type Event struct {
	Type     EventType
	Source   netip.Addr
	User     string
	Kind     SessionKind
	Reason   string // Refused
	At       time.Time
	Duration time.Duration // SessionEnd
	Session  uint64        // pairs a SessionEnd with its SessionStart
	PTY      bool
	Forward  string // host:port
	// JWTUser is the token's user (IdP user ID) for a token login, as
	// the token said and the network map allowed; empty for a key login.
	JWTUser string
}

// maxAuditedTargets bounds the -L targets a connection remembers for
// their end events; further targets are logged but not audited one by one.
const maxAuditedTargets = 32

// audit hands e to Options.Audit, which must not block.
func (s *Server) audit(e Event) {
	if s.o.Audit == nil {
		return
	}
	if e.At.IsZero() {
		e.At = s.o.Now()
	}
	s.o.Audit(e)
}

// nextSession numbers sessions for pairing their start and end.
func (s *Server) nextSession() uint64 { return s.sessionSeq.Add(1) }

// refusal is the last reason a connection's login was refused, for one
// Refused event if its handshake fails.
type refusal struct {
	user string
	err  error
}

// watchRefusals makes cfg's login callbacks note their refusals in r
// ("none" only when it is more than the usual first try).
func watchRefusals(cfg *ssh.ServerConfig, r *refusal) {
	if none := cfg.NoClientAuthCallback; none != nil {
		cfg.NoClientAuthCallback = func(md ssh.ConnMetadata) (*ssh.Permissions, error) {
			p, err := none(md)
			if err != nil && !errors.Is(err, errAuthRequired) {
				r.user, r.err = md.User(), err
			}
			return p, err
		}
	}
	if pk := cfg.PublicKeyCallback; pk != nil {
		cfg.PublicKeyCallback = func(md ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			p, err := pk(md, k)
			if err != nil {
				r.user, r.err = md.User(), err
			}
			return p, err
		}
	}
	if pw := cfg.PasswordCallback; pw != nil {
		cfg.PasswordCallback = func(md ssh.ConnMetadata, password []byte) (*ssh.Permissions, error) {
			p, err := pw(md, password)
			if err != nil {
				r.user, r.err = md.User(), err
			}
			return p, err
		}
	}
}

// auditRefused records that c's login was refused, if a callback refused
// it (not a client that just went away).
func (s *Server) auditRefused(from netip.Addr, r *refusal) {
	if r.err == nil {
		return
	}
	s.auditRefusal(Event{Type: Refused, Source: from, User: r.user, Reason: r.err.Error()})
}

// auditForward records the first -L stream of c to target; the end of
// each comes when the connection ends (auditForwardsEnd).
func (c *conn) auditForward(target string) {
	c.mu.Lock()
	if _, ok := c.fwdAudit[target]; ok || len(c.fwdAudit) >= maxAuditedTargets {
		c.mu.Unlock()
		return
	}
	if c.fwdAudit == nil {
		c.fwdAudit = map[string]auditedForward{}
	}
	f := auditedForward{id: c.s.nextSession(), at: c.s.o.Now()}
	c.fwdAudit[target] = f
	c.mu.Unlock()
	c.s.audit(c.event(Event{Type: SessionStart, Kind: KindLocalForward, At: f.at, Session: f.id, Forward: target}))
}

type auditedForward struct {
	id uint64
	at time.Time
}

// auditForwardsEnd records the end of every -L target of c.
func (c *conn) auditForwardsEnd() {
	c.mu.Lock()
	fwd := c.fwdAudit
	c.fwdAudit = nil
	c.mu.Unlock()
	now := c.s.o.Now()
	for target, f := range fwd {
		c.s.audit(c.event(Event{Type: SessionEnd, Kind: KindLocalForward, At: now,
			Duration: now.Sub(f.at), Session: f.id, Forward: target}))
	}
}

// sessionKind is what a session started with startArgv's what runs.
func sessionKind(what string) SessionKind {
	switch what {
	case "<shell>":
		return KindShell
	case "<sftp>":
		return KindSFTP
	}
	return KindExec
}

// errLocalForwardingOff refuses ssh -L on a peer that does not allow it.
var errLocalForwardingOff = errors.New("local port forwarding is disabled on this peer (netbird up --enable-ssh-local-port-forwarding)")

// channelKind is what a channel of type t would have run, as far as its
// type tells.
func channelKind(t string) SessionKind {
	if t == "direct-tcpip" {
		return KindLocalForward
	}
	return KindNone
}

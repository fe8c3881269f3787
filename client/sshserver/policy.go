package sshserver

import (
	"errors"
	"net"
	"net/netip"
	"time"

	"golang.org/x/crypto/ssh"
)

// refusedGrace is how long a connection refused for want of a policy may
// go on (for its client to read why and give up) before it is cut: the
// firewall lets every map peer reach the SSH ports, and such a peer must
// not hold one of the maxPreAuth slots for the whole handshakeTimeout.
const refusedGrace = 2 * time.Second

// refusedHandshake bounds the whole handshake of a peer known, from its
// address alone, to have no policy: time enough to be told why, not to
// hold a pre-authentication slot by saying nothing.
const refusedHandshake = 5 * time.Second

// Limits of map peers no policy lets in (the firewall lets them reach
// the SSH ports so they can be told why): their connections never take
// the maxPreAuth slots of peers with a policy, but slots of their own,
// one per source, and a source gets one handshake (so one banner) per
// noPolicyEvery: any other is closed at accept, before the key exchange,
// so reconnecting at once gains nothing.
const (
	maxNoPolicyPreAuth   = 8
	maxNoPolicyPerSource = 1
	noPolicyEvery        = 10 * time.Second
)

// admitNoPolicy is admit for a connection from a map peer no policy lets
// in (refusal says why); s.mu held.
func (s *Server) admitNoPolicy(c net.Conn, from netip.Addr, refusal error) bool {
	now := s.o.Now()
	if last, ok := s.toldAt[from]; ok && now.Sub(last) < noPolicyEvery && now.Sub(last) >= 0 {
		s.refuse.warn("ssh connection dropped: no policy, and this peer was told less than a while ago", "from", from, "every", noPolicyEvery, "reason", refusal)
		return false
	}
	switch {
	case s.noPolicyTotal() >= maxNoPolicyPreAuth:
		s.refuse.warn("ssh connection dropped: too many connections of peers without a policy", "from", from, "limit", maxNoPolicyPreAuth, "reason", refusal)
		return false
	case s.noPolicy[from] >= maxNoPolicyPerSource:
		s.refuse.warn("ssh connection dropped: a connection of this peer without a policy is open", "from", from, "limit", maxNoPolicyPerSource, "reason", refusal)
		return false
	}
	// Forget sources told long ago, so the map stays as small as the
	// peers refused lately.
	if len(s.toldAt) >= 64 {
		for a, t := range s.toldAt {
			if now.Sub(t) >= noPolicyEvery || now.Before(t) {
				delete(s.toldAt, a)
			}
		}
	}
	s.toldAt[from] = now
	s.raw[c] = true
	s.noPolicy[from]++
	return true
}

// noPolicyTotal is how many connections of raw hold no-policy slots;
// s.mu held.
func (s *Server) noPolicyTotal() int {
	n := 0
	for _, c := range s.noPolicy {
		n += c
	}
	return n
}

// handshakeTimeout is how long c may take to log in.
func (s *Server) handshakeTimeout(c net.Conn) time.Duration {
	if s.access.Load().policyRefusal(addrOf(c.RemoteAddr())) != nil {
		return refusedHandshake
	}
	return handshakeTimeout
}

// errAuthRequired refuses the "none" login of a peer a policy lets in:
// it must present its key (or a token). Not a refusal worth auditing:
// every client tries "none" first.
var errAuthRequired = errors.New("a key or token login is required")

// policyCheck returns one connection's check that its peer has a policy
// letting it reach this peer on tcp/22: the agent's firewall lets every
// map peer reach the SSH ports (so that it is told, not left to time
// out), and this is where one without a policy stops, before any key is
// looked at and so before any channel, command or forward. The reason
// goes to the client in a banner, SSH's only way to say why a login
// failed, once per connection (clients try several keys); each refusal
// is logged (rate-limited) and the connection's last one audited; c is
// cut refusedGrace after the first. The returned func is called from the
// connection's handshake only.
func (s *Server) policyCheck(c net.Conn) func(ssh.ConnMetadata) error {
	told := false
	return func(md ssh.ConnMetadata) error {
		from := addrOf(md.RemoteAddr())
		err := s.access.Load().policyRefusal(from)
		if err == nil {
			return nil
		}
		s.refuse.warn("ssh login refused", "from", from, "user", md.User(), "reason", err)
		if told {
			return err
		}
		told = true
		_ = c.SetDeadline(time.Now().Add(refusedGrace))
		return &ssh.BannerError{Err: err, Message: "wiremesh: " + err.Error() + "\n"}
	}
}

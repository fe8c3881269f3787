package sshserver

import (
	"errors"
	"net"
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

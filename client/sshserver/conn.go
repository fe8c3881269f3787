package sshserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// conn is one authenticated client connection. Its context ends with the
// connection, and with it every channel and forwarded socket.
type conn struct {
	s        *Server
	sc       *ssh.ServerConn
	ctx      context.Context
	acc      account       // the local user, resolved and checked at login
	key      ssh.PublicKey // nil for a token login
	jwtUser  string        // the token's user ID, for a token login
	ipAddr   netip.Addr
	peer, ip string

	wg sync.WaitGroup // channel handlers, forward listeners and streams

	mu       sync.Mutex
	closing  bool
	refused  int // channels and forwards refused (auditlimit.go)
	sessions int
	streams  int
	fwd      map[string]net.Listener   // remote forwards (tcpip-forward) by requested address
	fwdAudit map[string]auditedForward // -L targets audited, by host:port (audit.go)
}

// stillAllowed decides again with the current map whether the key the
// client logged in with may reach this peer from its address.
func (c *conn) stillAllowed() error {
	if c.key == nil {
		return c.s.access.Load().authorizeUser(c.jwtUser, c.ipAddr, c.acc.Name)
	}
	_, err := c.s.access.Load().Authorize(c.key, c.ipAddr)
	return err
}

// errLimit refuses a channel or forward past a per-connection cap.
var errLimit = errors.New("limit reached")

// take reserves one of n slots counted by *count.
func (c *conn) take(count *int, n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing || *count >= n {
		return false
	}
	*count++
	return true
}

func (c *conn) give(count *int) {
	c.mu.Lock()
	*count--
	c.mu.Unlock()
}

func (c *conn) channels(chans <-chan ssh.NewChannel) {
	for nc := range chans {
		// Access is decided again for every new channel: a peer removed
		// from the map or whose policy was revoked opens no more.
		if err := c.stillAllowed(); err != nil {
			c.s.refuse.warn("ssh channel refused", "peer", c.peer, "ip", c.ip, "user", c.acc.Name, "reason", err)
			_ = nc.Reject(ssh.Prohibited, err.Error())
			c.refusedChannel(channelKind(nc.ChannelType()), err)
			continue
		}
		switch nc.ChannelType() {
		case "session":
			if !c.take(&c.sessions, maxSessionsPerConn) {
				_ = nc.Reject(ssh.ResourceShortage, fmt.Sprintf("%v: at most %d sessions per connection", errLimit, maxSessionsPerConn))
				continue
			}
			c.wg.Add(1)
			go func() { defer c.wg.Done(); defer c.give(&c.sessions); c.session(nc) }()
		case "direct-tcpip":
			if !c.s.o.AllowLocalForwarding {
				_ = nc.Reject(ssh.Prohibited, errLocalForwardingOff.Error())
				c.refusedChannel(KindLocalForward, errLocalForwardingOff)
				continue
			}
			if !c.take(&c.streams, maxStreamsPerConn) {
				_ = nc.Reject(ssh.ResourceShortage, fmt.Sprintf("%v: at most %d forwarded streams per connection", errLimit, maxStreamsPerConn))
				continue
			}
			c.wg.Add(1)
			go func() { defer c.wg.Done(); defer c.give(&c.streams); c.directTCPIP(nc) }()
		default:
			_ = nc.Reject(ssh.UnknownChannelType, "unsupported channel type "+nc.ChannelType())
		}
	}
}

func (c *conn) globalRequests(reqs <-chan *ssh.Request) {
	for r := range reqs {
		switch r.Type {
		case "tcpip-forward":
			err := c.stillAllowed()
			if err == nil {
				err = c.tcpipForward(r)
			}
			if err != nil {
				c.s.log.Info("ssh remote forward refused", "peer", c.peer, "ip", c.ip, "user", c.acc.Name, "reason", err)
				_ = r.Reply(false, nil)
				if !errors.Is(err, errLimit) {
					c.refusedChannel(KindRemoteForward, err)
				}
			}
		case "cancel-tcpip-forward":
			c.cancelForward(r)
		default:
			if r.WantReply {
				_ = r.Reply(false, nil)
			}
		}
	}
}

// pipe carries a stream both ways between an SSH channel and a socket,
// passing half-closes on, and ends (closing both) when both directions
// did, when the client closes the channel (reqs closes) or when ctx (the
// connection) ends, so a silent target holds nothing forever.
func pipe(ctx context.Context, ch ssh.Channel, reqs <-chan *ssh.Request, nc net.Conn) {
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(nc, ch)
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(ch, nc)
		_ = ch.CloseWrite()
		done <- struct{}{}
	}()
	stop := func() { _ = nc.Close(); _ = ch.Close() }
	end := ctx.Done()
	for n := 0; n < 2; {
		select {
		case <-done:
			n++
		case r, ok := <-reqs:
			if !ok {
				reqs = nil
				stop()
				continue
			}
			if r.WantReply {
				_ = r.Reply(false, nil)
			}
		case <-end:
			end = nil
			stop()
		}
	}
	stop()
	if reqs != nil {
		go ssh.DiscardRequests(reqs) // ends when the channel's close completes
	}
}

// directTCPIP is a local forward (ssh -L): the client asks this peer to
// connect somewhere and carry the stream.
func (c *conn) directTCPIP(nc ssh.NewChannel) {
	var m struct {
		Host     string
		Port     uint32
		OrigHost string
		OrigPort uint32
	}
	if err := ssh.Unmarshal(nc.ExtraData(), &m); err != nil || m.Port > 65535 {
		_ = nc.Reject(ssh.ConnectionFailed, "bad direct-tcpip request")
		return
	}
	target := net.JoinHostPort(m.Host, strconv.Itoa(int(m.Port)))
	d := net.Dialer{Timeout: 30 * time.Second}
	tc, err := d.DialContext(c.ctx, "tcp", target)
	if err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		_ = tc.Close()
		return
	}
	c.s.log.Info("ssh port forward", "peer", c.peer, "ip", c.ip, "user", c.acc.Name, "to", target)
	c.auditForward(target)
	pipe(c.ctx, ch, reqs, tc)
}

// forwardBind is where a remote forward listens: loopback whatever the
// client asked for, as OpenSSH's default GatewayPorts=no does, so a peer
// opens no port on the host's networks. The loopback family follows the
// requested address.
func forwardBind(requested string) string {
	if ip, err := netip.ParseAddr(requested); err == nil && ip.Is6() && !ip.Is4In6() {
		return "::1"
	}
	return "127.0.0.1"
}

// tcpipForward is a remote forward (ssh -R): this peer listens on
// loopback and sends each connection back over the SSH connection.
func (c *conn) tcpipForward(r *ssh.Request) error {
	if !c.s.o.AllowRemoteForwarding {
		return errors.New("remote port forwarding is disabled on this peer (netbird up --enable-ssh-remote-port-forwarding)")
	}
	var m struct {
		Addr string
		Port uint32
	}
	if err := ssh.Unmarshal(r.Payload, &m); err != nil || m.Port > 65535 {
		return errors.New("bad tcpip-forward request")
	}
	if m.Port != 0 && m.Port < 1024 && c.acc.UID != 0 {
		return fmt.Errorf("port %d is privileged: only root may forward it", m.Port)
	}
	c.mu.Lock()
	switch {
	case c.closing:
		c.mu.Unlock()
		return errors.New("connection closing")
	case len(c.fwd) >= maxForwardsPerConn:
		c.mu.Unlock()
		return fmt.Errorf("%w: at most %d remote forwards per connection", errLimit, maxForwardsPerConn)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(forwardBind(m.Addr), strconv.Itoa(int(m.Port))))
	if err != nil {
		c.mu.Unlock()
		return err
	}
	port := uint32(ln.Addr().(*net.TCPAddr).Port)
	if c.fwd == nil {
		c.fwd = map[string]net.Listener{}
	}
	// By the port actually bound: the client cancels a port-0 forward
	// with the port it was given.
	c.fwd[net.JoinHostPort(m.Addr, strconv.Itoa(int(port)))] = ln
	c.wg.Add(1)
	c.mu.Unlock()
	var reply []byte
	if m.Port == 0 {
		reply = ssh.Marshal(struct{ Port uint32 }{port})
	}
	_ = r.Reply(true, reply)
	c.s.log.Info("ssh remote forward", "peer", c.peer, "ip", c.ip, "user", c.acc.Name, "listen", ln.Addr().String())
	id, start, listen := c.s.nextSession(), c.s.o.Now(), ln.Addr().String()
	c.s.audit(c.event(Event{Type: SessionStart, Kind: KindRemoteForward, At: start, Session: id, Forward: listen}))
	go func() {
		defer c.wg.Done()
		defer func() {
			end := c.s.o.Now()
			c.s.audit(c.event(Event{Type: SessionEnd, Kind: KindRemoteForward, At: end, Duration: end.Sub(start), Session: id, Forward: listen}))
		}()
		for {
			tc, err := ln.Accept()
			if err != nil {
				return
			}
			if !c.take(&c.streams, maxStreamsPerConn) {
				_ = tc.Close()
				continue
			}
			oa, _ := tc.RemoteAddr().(*net.TCPAddr)
			payload := ssh.Marshal(struct {
				Addr     string
				Port     uint32
				OrigAddr string
				OrigPort uint32
			}{m.Addr, port, oa.IP.String(), uint32(oa.Port)})
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				defer c.give(&c.streams)
				ch, reqs, err := c.sc.OpenChannel("forwarded-tcpip", payload)
				if err != nil {
					_ = tc.Close()
					return
				}
				pipe(c.ctx, ch, reqs, tc)
			}()
		}
	}()
	return nil
}

func (c *conn) cancelForward(r *ssh.Request) {
	var m struct {
		Addr string
		Port uint32
	}
	_ = ssh.Unmarshal(r.Payload, &m)
	k := net.JoinHostPort(m.Addr, strconv.Itoa(int(m.Port)))
	c.mu.Lock()
	ln := c.fwd[k]
	delete(c.fwd, k)
	c.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	_ = r.Reply(ln != nil, nil)
}

// closeForwards closes every remote forward's listener and refuses new
// ones: the connection is ending.
func (c *conn) closeForwards() {
	c.mu.Lock()
	fwd := c.fwd
	c.fwd, c.closing = nil, true
	c.mu.Unlock()
	for _, ln := range fwd {
		_ = ln.Close()
	}
}

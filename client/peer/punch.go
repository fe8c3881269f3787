package peer

import (
	"crypto/hmac"
	"crypto/sha256"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/wiremesh/wiremesh/client/wg"
	"github.com/wiremesh/wiremesh/internal/key"
)

// Hole punching beyond ICE, for NAT boxes that accept packets sent to
// their own WAN address (TESTBED's hard case). There the first direct
// check to arrive leaves a stale conntrack entry on the remote NAT, which
// makes the remote's own mapping toward us use another port, so every
// direct pair fails and ICE settles on TURN. Once relayed, we:
//
//  1. keep silent on the direct path for PunchQuiet, so the stale entries
//     on both NATs expire (UDP unreplied entries live 30 s on Linux);
//  2. the controlling side (keeper) sends one probe to the remote's
//     server-reflexive address, creating its own NAT mapping (and a new
//     stale entry on the remote NAT), then refreshes its mapping with
//     TTL-1 probes that expire at its own NAT and never reach the remote;
//  3. after another PunchQuiet the remote's stale entry is gone, and the
//     controlled side (opener) sends hello probes to the keeper's
//     server-reflexive address: its NAT maps it without conflict and the
//     keeper's NAT lets it in, matching the keeper's mapping;
//  4. the keeper answers with acks, and both point WireGuard at the
//     direct path. TURN stays as the fallback ICE keeps alive.
//
// Measured in the lab, this schedule mostly misses: new flows from the
// WireGuard port take the port's newest (often random) mapping, so the
// keeper's open rarely keeps its port. Between our agents portpunch.go
// (fresh ports, one quiet period) gets a direct path first; this one
// stays as a second chance.
//
// Probes carry a MAC keyed by both sides' ICE passwords, which only the
// two peers know (they travel sealed through signal), so nobody else can
// make us move a peer's endpoint.
const (
	probeOpen  = 1 // keeper: create or refresh its mapping
	probeHello = 2 // opener: first packet through both NATs
	probeAck   = 3 // keeper: path confirmed
)

// DefaultPunchQuiet is how long stale NAT entries need to expire: Linux
// keeps unreplied UDP entries 30 s, counted from ICE's last direct check,
// which can come a few seconds after the relay path was chosen.
const DefaultPunchQuiet = 40 * time.Second

type probeEvent struct {
	from netip.AddrPort
	body []byte
}

// probeKey is the MAC key of a session: both ICE passwords, in a fixed order.
func probeKey(s *session) []byte {
	a, b := s.pwd, s.remotePwd
	if a > b {
		a, b = b, a
	}
	k := sha256.Sum256([]byte(a + "\x00" + b))
	return k[:]
}

func probeMAC(k []byte, kind byte, sender key.Public) []byte {
	m := hmac.New(sha256.New, k)
	m.Write([]byte{kind})
	m.Write(sender[:])
	return m.Sum(nil)[:16]
}

func (c *Conn) probeBody(s *session, kind byte) []byte {
	me := c.cfg.Local.Public()
	body := append([]byte{kind}, me[:]...)
	return append(body, probeMAC(probeKey(s), kind, me)...)
}

// ProbeSender extracts the claimed sender of a probe body, so the engine
// can route it; the peer's loop authenticates it.
func ProbeSender(body []byte) (key.Public, bool) {
	var k key.Public
	if len(body) != wg.ProbeBodyLen {
		return k, false
	}
	copy(k[:], body[1:1+key.Size])
	return k, true
}

type punchTick struct{ gen int }

// punch is the per-session hole-punching state, driven by the loop.
type punch struct {
	remote  netip.AddrPort // remote server-reflexive address
	started time.Time
	done    bool
	opened  bool
}

func (p *punch) finish() { p.done = true }

// Probe hands a probe from the remote peer to the loop without blocking
// the receive path (a probe that finds the loop busy is dropped).
func (c *Conn) Probe(from netip.AddrPort, body []byte) {
	select {
	case c.events <- probeEvent{from: from, body: body}:
	default:
	}
}

func (c *Conn) punchQuiet() time.Duration {
	if c.cfg.PunchQuiet > 0 {
		return c.cfg.PunchQuiet
	}
	return DefaultPunchQuiet
}

// startPunch begins punching for a relayed session, once.
func (c *Conn) startPunch(s *session) {
	if s.punch.started.IsZero() && s.punch.remote.IsValid() && !c.cfg.NoPunch {
		s.punch.started = time.Now()
		c.log.Debug("relayed: will try to punch a direct path", "remote", s.punch.remote, "keeper", c.controlling())
		c.schedulePunch(s, time.Second)
	}
}

func (c *Conn) schedulePunch(s *session, d time.Duration) {
	gen := s.gen
	time.AfterFunc(d, func() { c.post(punchTick{gen: gen}) })
}

// onPunchTick advances the schedule of steps 2 and 3.
func (c *Conn) onPunchTick(s *session) {
	p := &s.punch
	if p.done {
		return
	}
	quiet := c.punchQuiet()
	elapsed := time.Since(p.started)
	bind := c.wg.Bind()
	switch {
	case elapsed > 2*quiet+30*time.Second:
		c.log.Debug("no direct path punched; staying relayed")
		p.finish()
		return
	case c.controlling() && elapsed >= quiet:
		ttl := 1
		if !p.opened {
			ttl, p.opened = 0, true
		}
		if err := bind.SendProbe(p.remote, c.probeBody(s, probeOpen), ttl); err != nil {
			c.log.Debug("probe", "err", err)
			p.finish()
			return
		}
		c.schedulePunch(s, 5*time.Second)
	case !c.controlling() && elapsed >= 2*quiet+2*time.Second:
		if err := bind.SendProbe(p.remote, c.probeBody(s, probeHello), 0); err != nil {
			p.finish()
			return
		}
		c.schedulePunch(s, time.Second)
	default:
		c.schedulePunch(s, time.Second)
	}
}

// onProbe completes step 4.
func (c *Conn) onProbe(s *session, ev probeEvent, allowed []netip.Prefix) {
	if s.punch.started.IsZero() || (s.punch.done && !s.punched) || s.remotePwd == "" {
		return
	}
	kind := ev.body[0]
	if !hmac.Equal(ev.body[1+key.Size:], probeMAC(probeKey(s), kind, c.cfg.Remote)) {
		c.log.Debug("dropping probe with a bad MAC", "from", ev.from)
		return
	}
	switch {
	case kind == probeHello && c.controlling():
		for i := 0; i < 3; i++ {
			_ = c.wg.Bind().SendProbe(ev.from, c.probeBody(s, probeAck), 0)
		}
	case kind == probeAck && !c.controlling():
	default:
		return
	}
	if s.punched {
		return
	}
	if err := c.wg.SetPeer(wg.Peer{Key: c.cfg.Remote, AllowedIPs: allowed, Endpoint: ev.from.String(), Keepalive: keepalive}); err != nil {
		return
	}
	s.punched, s.adopted = true, true
	c.onICE = true
	if c.rl.pc != nil {
		_ = c.wg.Bind().RedirectRelay(c.relayName(), ev.from.String())
	}
	s.punch.finish()
	c.log.Info("punched a direct path through both NATs", "endpoint", ev.from, "after", time.Since(s.punch.started).Round(time.Millisecond))
	c.setStatus(func(st *Status) {
		st.Relayed, st.LocalType, st.RemoteType, st.RelayAddress = false, "srflx", "srflx", ""
		st.State = "Connected"
		st.RemoteEndpoint = ev.from.String()
		if port := c.wg.Bind().Port(); port != 0 {
			st.LocalEndpoint = net.JoinHostPort("0.0.0.0", strconv.Itoa(port))
		}
	})
}

func itoa(n int) string {
	return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(n)).String()[len("0.0.0.0:"):]
}

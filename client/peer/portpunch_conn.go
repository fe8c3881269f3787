package peer

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/wiremesh/wiremesh/client/wg"
	"github.com/wiremesh/wiremesh/proto/signalpb"
)

// The Conn's side of the fresh-port punch (portpunch.go): when to try,
// and the punched path as WireGuard's endpoint. All of it runs on the
// Conn's loop.

const (
	// portPunchGrace: a relayed pair tries the fresh-port punch this long
	// after the relay carried it, when ICE found no direct path meanwhile
	// (between home routers ICE needs about a second).
	portPunchGrace = 2 * time.Second
	// portPunchRetryFirst and portPunchRetryMax bound the back-off between
	// failed attempts: a pair that cannot go direct stays relayed and tries
	// again now and then, so that it goes direct once its NATs allow it.
	portPunchRetryFirst = 10 * time.Second
	portPunchRetryMax   = 5 * time.Minute
	// portPunchGive is how long the keeper waits for the hello after the
	// quiet period.
	portPunchGive = 10 * time.Second
	// portPunchConfirm is how long the keeper waits, after acking the
	// hello, for the opener's confirm: the opener hellos for 3 s.
	portPunchConfirm = 4 * time.Second
	// DefaultPortPunchQuiet: Linux keeps an unreplied UDP entry 30 s.
	DefaultPortPunchQuiet = 32 * time.Second
	// directSilence: nothing authentic from the remote on the punched path
	// for this long (WireGuard keepalives come every 25 s at the latest)
	// means the path died, e.g. a NAT rebooted: back to the relay, and
	// punch again.
	directSilence    = 40 * time.Second
	directCheckEvery = 5 * time.Second
)

type (
	portPunchStart struct{}
	portPunchDone  struct{ p *portPunch }
	directCheck    struct{ d *directPath }
)

// portPunchState is loop-owned.
type portPunchState struct {
	remoteWiremesh bool // the remote's offer or answer had WiremeshTurnPunch
	scheduled      bool
	attempts       int
	// nextAt: backing off until then after a failed attempt; the remote's
	// announcements do not start one earlier (the remote does not set our
	// rate), the newest is kept in pending for when our attempt starts.
	nextAt    time.Time
	pending   portPunchAddr
	pendingAt time.Time
	p         *portPunch
	direct    *directPath
	env       *portPunchEnv // nil: the real network
}

// admit reports whether the remote's announcement a may start an attempt
// now; if not (backing off), it keeps a as pending.
func (pp *portPunchState) admit(now time.Time, a portPunchAddr) bool {
	if now.Before(pp.nextAt) {
		pp.pending, pp.pendingAt = a, now
		return false
	}
	return true
}

// takePending returns the announcement kept during the back-off if it is
// younger than fresh (the opener still waits for our answer), and forgets
// it.
func (pp *portPunchState) takePending(now time.Time, fresh time.Duration) (portPunchAddr, bool) {
	a, at := pp.pending, pp.pendingAt
	pp.pending, pp.pendingAt = portPunchAddr{}, time.Time{}
	return a, !at.IsZero() && now.Sub(at) < fresh
}

func (c *Conn) directName() string { return "dir-" + c.cfg.Remote.String() }

func (c *Conn) portPunchQuiet() time.Duration {
	if c.cfg.PunchQuiet > 0 {
		return c.cfg.PunchQuiet
	}
	return DefaultPortPunchQuiet
}

// portPunchWanted: relayed now, nothing direct, allowed to punch.
func (c *Conn) portPunchWanted() bool {
	pp := &c.pp
	return !c.cfg.NoPunch && !c.cfg.ForceRelay && pp.remoteWiremesh && pp.p == nil && pp.direct == nil &&
		!c.onICE && c.rl.pc != nil
}

// schedulePortPunch arms one start, portPunchGrace from now.
func (c *Conn) schedulePortPunch() { c.schedulePortPunchIn(portPunchGrace) }

func (c *Conn) schedulePortPunchIn(d time.Duration) {
	if c.pp.scheduled || !c.portPunchWanted() {
		return
	}
	c.pp.scheduled = true
	time.AfterFunc(d, func() { c.post(portPunchStart{}) })
}

// portPunchBackoff is the wait after the n-th failed attempt in a row:
// 10 s, 20 s, 40 s ... at most 5 min.
func portPunchBackoff(n int) time.Duration {
	d := portPunchRetryFirst
	for i := 1; i < n && d < portPunchRetryMax; i++ {
		d *= 2
	}
	return min(d, portPunchRetryMax)
}

func (c *Conn) startPortPunch(ctx context.Context) {
	c.pp.scheduled = false
	if !c.portPunchWanted() {
		return
	}
	env := portPunchEnv{listen: listenPunch, mapped: stunMapped(c.cfg.URLs)}
	if c.pp.env != nil {
		env = *c.pp.env
	}
	env.announce = func(ctx context.Context, a portPunchAddr) error {
		return c.sig.Send(ctx, c.cfg.Remote, &signalpb.Body{Type: signalpb.Body_CANDIDATE, Payload: a.payload()})
	}
	c.pp.attempts++
	cfg := portPunchConfig{keeper: c.controlling(), me: c.cfg.Local.Public(), remote: c.cfg.Remote,
		quiet: c.portPunchQuiet(), refresh: 5 * time.Second, give: portPunchGive, confirm: portPunchConfirm, log: c.log}
	if cfg.quiet < 5*time.Second {
		cfg.refresh = cfg.quiet / 2 // tests
	}
	c.pp.p = startPortPunch(cfg, env, func(ctx context.Context, p *portPunch) {
		// Not c.post: the loop may be waiting in p.close for this goroutine.
		select {
		case c.events <- portPunchDone{p: p}:
		case <-ctx.Done():
		case <-c.done:
		}
	})
	// The opener answers within 2*quiet+give of its announcement; one kept
	// while we backed off is still answered if we are well inside that.
	// (An opener has no use for a keeper's announcement of an attempt it
	// no longer runs.)
	if a, ok := c.pp.takePending(time.Now(), cfg.quiet+cfg.give); ok && cfg.keeper {
		c.pp.p.remoteAddr(a)
	}
	c.log.Debug("relayed: punching a direct path on a fresh port", "keeper", cfg.keeper, "attempt", c.pp.attempts)
}

// onPortPunchAnnounce takes the remote's fresh address; an attempt starts
// at once if none runs and we are not backing off, so that both sides
// take part. While we back off the remote's attempt goes unanswered
// unless ours starts soon enough (takePending): a remote cannot make us
// try more often than our own back-off allows.
func (c *Conn) onPortPunchAnnounce(ctx context.Context, payload string) {
	a, _, err := parsePortPunch(payload, c.cfg.Overlay)
	if err != nil {
		c.log.Debug("bad port punch announcement", "err", err)
		return
	}
	c.pp.remoteWiremesh = true
	if c.pp.p != nil {
		c.pp.p.remoteAddr(a)
		return
	}
	if !c.pp.admit(time.Now(), a) {
		c.log.Debug("port punch announcement while backing off; kept for our next attempt", "addr", a.addr, "next_attempt", time.Until(c.pp.nextAt).Round(time.Second))
		return
	}
	c.startPortPunch(ctx)
	if c.pp.p != nil {
		c.pp.p.remoteAddr(a)
	}
}

// onPortPunchDone installs a punched path, or schedules the next attempt.
func (c *Conn) onPortPunchDone(ev portPunchDone, allowed []netip.Prefix) {
	if ev.p != c.pp.p {
		return
	}
	p := c.pp.p
	c.pp.p = nil
	p.close() // returns at once: its goroutine has finished
	if p.err != nil {
		next := portPunchBackoff(c.pp.attempts)
		c.pp.nextAt = time.Now().Add(next)
		c.log.Info("no direct path punched on a fresh port; staying relayed", "err", p.err, "attempt", c.pp.attempts, "retry_in", next)
		c.schedulePortPunchIn(next)
		return
	}
	d := p.result
	if c.onICE {
		d.conn.Close() // ICE found a direct path meanwhile
		return
	}
	endpoint := c.wg.Bind().Relay(c.directName(), d.conn)
	if err := c.wg.SetPeer(wg.Peer{Key: c.cfg.Remote, AllowedIPs: allowed, Endpoint: endpoint, Keepalive: keepalive}); err != nil {
		c.log.Error("set WireGuard endpoint to the punched path", "err", err)
		c.wg.Bind().Unrelay(c.directName())
		d.conn.Close()
		return
	}
	d.live = newPathLiveness(time.Now(), c.directCounters())
	c.pp.direct = d
	c.pp.attempts = 0
	c.pp.nextAt = time.Time{}
	c.onICE = true
	if c.rl.pc != nil {
		_ = c.wg.Bind().RedirectRelay(c.relayName(), endpoint)
	}
	c.scheduleDirectCheck(d)
	c.log.Info("punched a direct path on a fresh port", "endpoint", d.remote, "after", d.after.Round(time.Millisecond))
	local := ""
	if ua, ok := d.conn.LocalAddr().(*net.UDPAddr); ok {
		local = net.JoinHostPort("0.0.0.0", strconv.Itoa(ua.Port))
	}
	c.setStatus(func(st *Status) {
		st.State, st.Relayed, st.RelayAddress = "Connected", false, ""
		st.LocalType, st.RemoteType = "srflx", "srflx"
		st.LocalEndpoint, st.RemoteEndpoint = local, d.remote.String()
	})
}

// closePortPunch stops an attempt and drops the punched path.
func (c *Conn) closePortPunch() {
	if c.pp.p != nil {
		c.pp.p.close()
		if c.pp.p.result != nil {
			c.pp.p.result.conn.Close()
		}
		c.pp.p = nil
	}
	if c.pp.direct != nil {
		c.wg.Bind().Unrelay(c.directName())
		c.pp.direct.conn.Close()
		c.pp.direct = nil
	}
}

// directCounters reads what pathLiveness compares: WireGuard's
// authenticated receive from the remote, and what the relay and the
// punched path delivered to WireGuard. A failed read counts as no sign of
// life: at worst the pair goes back to the relay.
func (c *Conn) directCounters() counters {
	var out counters
	if stats, err := c.wg.PeerStats(); err != nil {
		c.log.Debug("read WireGuard counters for the punched path", "err", err)
	} else if st, ok := stats[c.cfg.Remote]; ok && st.RxBytes > 0 {
		out.auth = uint64(st.RxBytes)
	}
	b := c.wg.Bind()
	out.relay, out.direct = b.RelayReceived(c.relayName()), b.RelayReceived(c.directName())
	return out
}

func (c *Conn) scheduleDirectCheck(d *directPath) {
	time.AfterFunc(directCheckEvery, func() { c.post(directCheck{d: d}) })
}

// onDirectCheck drops a punched path that went silent: WireGuard moves to
// the relay (if open) at once and a new attempt is scheduled.
func (c *Conn) onDirectCheck(ev directCheck, allowed []netip.Prefix) {
	if ev.d != c.pp.direct {
		return
	}
	silent := ev.d.live.observe(time.Now(), c.directCounters())
	if silent < directSilence {
		c.scheduleDirectCheck(ev.d)
		return
	}
	c.log.Info("punched path silent; back to the relay", "endpoint", ev.d.remote, "silent", silent.Round(time.Second))
	c.wg.Bind().Unrelay(c.directName())
	ev.d.conn.Close()
	c.pp.direct = nil
	c.onICE = false
	if !c.fallBackToRelay(&c.rl, allowed) {
		c.setStatus(func(st *Status) { *st = Status{State: "Connecting", Since: st.Since} })
	}
}

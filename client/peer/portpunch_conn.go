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
	// DefaultPortPunchQuiet: Linux keeps an unreplied UDP entry 30 s.
	DefaultPortPunchQuiet = 32 * time.Second
	// directSilence: nothing from the remote on the punched path for this
	// long (WireGuard keepalives come every 25 s at the latest) means the
	// path died, e.g. a NAT rebooted: back to the relay, and punch again.
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
	p              *portPunch
	direct         *directPath
	env            *portPunchEnv // nil: the real network
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
		quiet: c.portPunchQuiet(), refresh: 5 * time.Second, give: portPunchGive, log: c.log}
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
	c.log.Debug("relayed: punching a direct path on a fresh port", "keeper", cfg.keeper, "attempt", c.pp.attempts)
}

// onPortPunchAnnounce takes the remote's fresh address; an attempt starts
// at once if none runs, so that both sides take part.
func (c *Conn) onPortPunchAnnounce(ctx context.Context, payload string) {
	a, _, err := parsePortPunch(payload)
	if err != nil {
		c.log.Debug("bad port punch announcement", "err", err)
		return
	}
	c.pp.remoteWiremesh = true
	if c.pp.p == nil {
		c.startPortPunch(ctx)
	}
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
	c.pp.direct = d
	c.pp.attempts = 0
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

func (c *Conn) scheduleDirectCheck(d *directPath) {
	time.AfterFunc(directCheckEvery, func() { c.post(directCheck{d: d}) })
}

// onDirectCheck drops a punched path that went silent: WireGuard moves to
// the relay (if open) at once and a new attempt is scheduled.
func (c *Conn) onDirectCheck(ev directCheck, allowed []netip.Prefix) {
	if ev.d != c.pp.direct {
		return
	}
	silent := ev.d.conn.silentFor(time.Now())
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

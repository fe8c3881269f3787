package peer

import (
	"context"
	"net/netip"
	"time"

	"github.com/wiremesh/wiremesh/client/relayclient"
	"github.com/wiremesh/wiremesh/client/wg"
)

// Relayer opens connections through NetBird relays (relayclient.Manager).
type Relayer interface {
	Enabled() bool
	HomeURL() string
	Open(ctx context.Context, url, remote string) (*relayclient.PeerConn, error)
}

// relayPath is the relayed path to the peer, used as soon as it is up
// (about one round trip plus a subscribe) and kept as the fallback while
// ICE carries the traffic.
type relayPath struct {
	gen      int
	opening  bool
	pc       *relayclient.PeerConn
	url      string // the relay carrying the pair
	remote   string // the remote's home relay, from its offer or answer
	backoff  time.Duration
	retry    *time.Timer
	adopted  bool
	endpoint string // WireGuard endpoint of the relayed path
}

type (
	relayReady struct {
		gen int
		url string
		pc  *relayclient.PeerConn
		err error
	}
	relayLost  struct{ gen int }
	relayRetry struct{}
	adoptRelay struct{ gen int }
)

// relayName is the Bind endpoint of the relayed path (TURN paths of ICE
// use the bare key).
func (c *Conn) relayName() string { return "srv-" + c.cfg.Remote.String() }

// startRelay opens the relayed path if relays are configured and none is
// open or opening. The pair rule: the controlling side uses its own home
// relay, the other side the remote's advertised one, so both meet on the
// controller's home relay.
func (c *Conn) startRelay(ctx context.Context, r *relayPath) {
	if c.cfg.Relay == nil || !c.cfg.Relay.Enabled() || r.opening || r.pc != nil {
		return
	}
	url := c.cfg.Relay.HomeURL()
	if !c.controlling() && r.remote != "" {
		// Until the remote's offer names its home relay, try our own: with
		// one relay (the usual self-hosted setup) both homes are the same.
		url = r.remote
	}
	if url == "" {
		// No home relay yet, or no offer from the remote yet: try again soon.
		c.scheduleRelay(r, 500*time.Millisecond)
		return
	}
	r.gen++
	r.opening = true
	gen, remote := r.gen, c.cfg.Remote.String()
	go func() {
		pc, err := c.cfg.Relay.Open(ctx, url, remote)
		c.post(relayReady{gen: gen, url: url, pc: pc, err: err})
	}()
}

func (c *Conn) scheduleRelay(r *relayPath, d time.Duration) {
	if r.retry != nil {
		r.retry.Stop()
	}
	r.retry = time.AfterFunc(d, func() { c.post(relayRetry{}) })
}

// onRelayReady installs the relayed path. With no ICE path in use it
// becomes WireGuard's endpoint at once: the controlling side starts the
// handshake over it, the controlled side answers it and adopts it shortly
// after.
func (c *Conn) onRelayReady(ev relayReady, r *relayPath, onICE bool, allowed []netip.Prefix) {
	if ev.gen != r.gen {
		if ev.pc != nil {
			ev.pc.Close()
		}
		return
	}
	r.opening = false
	if ev.err != nil {
		c.log.Debug("relay path not ready", "relay", ev.url, "err", ev.err, "retry_in", r.backoff)
		c.scheduleRelay(r, r.backoff)
		r.backoff = min(r.backoff*2, 30*time.Second)
		return
	}
	r.pc, r.url, r.backoff, r.adopted = ev.pc, ev.url, time.Second, false
	if c.controlling() && !onICE {
		// This side starts the handshake at once. What the peer sent
		// before this side listened (kept by the relay client) can only
		// be its own handshake, sent after it gave up waiting for ours
		// while our map did not list it yet: answering that stale one
		// crosses the two handshakes and costs WireGuard its 5 s retry.
		if n := ev.pc.Discard(); n > 0 {
			c.log.Debug("dropped the peer's early relayed packets: this side starts the handshake", "packets", n)
		}
	}
	endpoint := c.wg.Bind().Relay(c.relayName(), ev.pc)
	r.endpoint = endpoint
	gen := r.gen
	go func() {
		<-ev.pc.Done()
		c.post(relayLost{gen: gen})
	}()
	c.log.Info("relayed path ready", "relay", ev.url)
	if onICE {
		return
	}
	if c.controlling() {
		c.useRelay(r, endpoint, allowed)
	} else {
		time.AfterFunc(adoptDelay, func() { c.post(adoptRelay{gen: gen}) })
		c.reportRelay(r)
	}
}

// useRelay points WireGuard at the relayed path.
func (c *Conn) useRelay(r *relayPath, endpoint string, allowed []netip.Prefix) bool {
	_ = c.wg.Bind().RedirectRelay(c.relayName(), "")
	if err := c.wg.SetPeer(wg.Peer{Key: c.cfg.Remote, AllowedIPs: allowed, Endpoint: endpoint, Keepalive: keepalive}); err != nil {
		c.log.Error("set WireGuard endpoint to the relay", "err", err)
		return false
	}
	r.adopted = true
	c.reportRelay(r)
	return true
}

func (c *Conn) reportRelay(r *relayPath) {
	c.log.Info("peer connected through the relay", "relay", r.url)
	c.setStatus(func(st *Status) {
		*st = Status{State: "Connected", Relayed: true, RelayAddress: r.url, Since: st.Since}
	})
}

// fallBackToRelay is called when ICE lost its path: traffic returns to the
// relay at once, if one is open.
func (c *Conn) fallBackToRelay(r *relayPath, allowed []netip.Prefix) bool {
	if r.pc == nil {
		return false
	}
	c.log.Info("ICE path lost, back to the relay", "relay", r.url)
	return c.useRelay(r, r.endpoint, allowed)
}

// onRelayLost forgets a closed relayed path and opens a new one.
func (c *Conn) onRelayLost(ev relayLost, r *relayPath, onICE bool) {
	if ev.gen != r.gen || r.pc == nil {
		return
	}
	c.wg.Bind().Unrelay(c.relayName())
	r.pc.Close()
	r.pc = nil
	c.log.Info("relayed path closed", "relay", r.url)
	if !onICE {
		c.setStatus(func(st *Status) { *st = Status{State: "Connecting", Since: st.Since} })
	}
	c.scheduleRelay(r, r.backoff)
	r.backoff = min(r.backoff*2, 30*time.Second)
}

func (c *Conn) closeRelay(r *relayPath) {
	if r.retry != nil {
		r.retry.Stop()
	}
	if r.pc != nil {
		c.wg.Bind().Unrelay(c.relayName())
		r.pc.Close()
		r.pc = nil
	}
}

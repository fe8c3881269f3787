// Package peer runs the connection to one remote peer: one event loop that
// exchanges ICE credentials and candidates through signal, runs a
// pion/ice agent on the shared WireGuard socket, and points the WireGuard
// peer at the path ICE selected (direct, or through a TURN allocation). It
// restarts ICE with backoff when the path fails. It does not decide which
// peers exist; the engine does.
package peer

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/stun/v4"

	"github.com/wiremesh/wiremesh/client/wg"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/signalpb"
)

// Signaler delivers a body to a peer through signal.
type Signaler interface {
	Send(ctx context.Context, to key.Public, body *signalpb.Body) error
}

// WireGuard is the part of the device a peer connection configures.
type WireGuard interface {
	SetPeer(p wg.Peer) error
	Bind() *wg.Bind
}

// Config is everything a connection needs.
type Config struct {
	Local      key.Private
	Remote     key.Public
	AllowedIPs []netip.Prefix
	Overlay    netip.Prefix // never a candidate
	Mux        *Mux
	URLs       func() []*stun.URI
	WGPort     int
	Version    string
	Log        *slog.Logger
	// PunchQuiet overrides DefaultPunchQuiet; NoPunch turns punching off.
	PunchQuiet time.Duration
	NoPunch    bool
	// Relay opens relayed paths (nil: none). ForceRelay disables ICE, so
	// the relay is the only path (NB_FORCE_RELAY).
	Relay      Relayer
	ForceRelay bool
	// OnLeft, if set, is called (from the connection's loop; it must not
	// block) when the remote announced it is going away, so that routes
	// through it move at once.
	OnLeft func()
	// OnIdleHint, if set, is called (from the loop; it must not block)
	// when a GO_IDLE arrives that does not prove the remote left: without
	// a session id (NetBird's clients send none) or with one that is not
	// the remote's current session (a replay). The connection stays up;
	// the caller checks at once whether the peer still answers.
	OnIdleHint func()
}

// Status is what `netbird status` shows for the peer.
type Status struct {
	State          string // Idle, Connecting, Connected
	Relayed        bool
	LocalType      string
	RemoteType     string
	LocalEndpoint  string
	RemoteEndpoint string
	RelayAddress   string // the relay carrying the pair, when relayed through one
	Since          time.Time
	// Left: the remote said it is going away (GO_IDLE) and has not been
	// connected since; its connection is gone, not merely interrupted.
	Left bool
}

// Conn is one remote peer's connection.
type Conn struct {
	cfg Config
	sig Signaler
	wg  WireGuard
	log *slog.Logger

	events chan any
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	status Status

	// turnToRemote: our TURN (relay) candidates go to the remote. Not to a
	// NetBird client that has a relay server (SPEC-wire §5: then ICE is
	// host and srflx only); see signalpb.Body.WiremeshTurnPunch. Set by
	// the loop, read by the ICE agent's candidate callback.
	turnToRemote atomic.Bool

	// sentSession is the session id of our latest offer or answer: our
	// GO_IDLE carries it, so that the remote can tell it from a replay.
	// Guarded by mu.
	sentSession []byte

	// owned by the loop goroutine
	rl    relayPath
	onICE bool // WireGuard's endpoint is a path ICE selected
	// remoteSession is the session id of the remote's latest offer or
	// answer; retired holds the remote's sessions that a GO_IDLE ended
	// (most recent last), which a replayed offer may not bring back.
	remoteSession []byte
	retired       [][]byte
	pp            portPunchState // the fresh-port punch (portpunch_conn.go)
}

// New starts the connection's event loop.
func New(cfg Config, sig Signaler, w WireGuard) *Conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{cfg: cfg, sig: sig, wg: w, log: cfg.Log.With("peer", cfg.Remote.String()),
		events: make(chan any, 64), cancel: cancel, done: make(chan struct{}),
		status: Status{State: "Connecting", Since: time.Now()}}
	c.turnToRemote.Store(cfg.Relay == nil || !cfg.Relay.Enabled())
	go c.run(ctx)
	return c
}

// Close stops the loop and waits for it.
func (c *Conn) Close() {
	c.cancel()
	<-c.done
}

// Status returns the current status.
func (c *Conn) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// Signal hands a message from the remote peer to the loop.
func (c *Conn) Signal(b *signalpb.Body) { c.post(b) }

// SetAllowedIPs updates the WireGuard allowed IPs without reconnecting.
func (c *Conn) SetAllowedIPs(ips []netip.Prefix) { c.post(allowedIPs(ips)) }

func (c *Conn) post(ev any) {
	select {
	case c.events <- ev:
	case <-c.done:
	}
}

type (
	allowedIPs []netip.Prefix
	iceState   struct {
		gen int
		s   ice.ConnectionState
	}
	iceResult struct {
		gen  int
		conn *ice.Conn
		err  error
	}
	pairChanged struct{ gen int }
	// adoptPath makes the controlled side point WireGuard at the path
	// itself, once the controlling side had time to start the handshake.
	adoptPath struct{ gen int }
)

// session is one ICE agent and the credentials exchanged for it.
type session struct {
	gen         int
	agent       *ice.Agent
	ufrag, pwd  string
	id          []byte
	remoteUfrag string
	remotePwd   string
	connecting  bool
	conn        *ice.Conn

	candMu    sync.Mutex
	cands     []localCand // gathered so far, resent with offers and answers
	relayed   bool
	connected bool
	adopted   bool // the controlled side pointed WireGuard at the path
	turnOnly  bool // the selected pair goes through a TURN server
	keptRelay bool // ICE connected through TURN only and the relay server was kept
	punched   bool // WireGuard uses a path punched beyond ICE (punch.go)
	punch     punch
	// resent: our candidates went out again once the remote's ICE agent
	// was known to exist (see resendCandidates).
	resent bool
}

// localCand is a local ICE candidate as sent through signal.
type localCand struct {
	payload string
	relay   bool // through a TURN server
}

func (c *Conn) controlling() bool { return c.cfg.Local.Public().String() > c.cfg.Remote.String() }

func (c *Conn) setStatus(f func(*Status)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, left := c.status.State, c.status.Left
	f(&c.status)
	if c.status.State != prev {
		c.status.Since = time.Now()
	}
	// Until connected again, a remote that left stays marked as gone
	// whatever the loop does meanwhile (new sessions reset the status).
	c.status.Left = (left || c.status.Left) && c.status.State != "Connected"
}

func (c *Conn) run(ctx context.Context) {
	defer close(c.done)
	// Only the controlling side starts the WireGuard handshake. If both
	// initiate at once, each handshake overwrites the other and both wait
	// 5 s (REKEY_TIMEOUT) to retry; and a peer that tried to send before
	// it had an endpoint also waits 5 s. So the controlling side adds the
	// WireGuard peer only when it has a path (its earlier packets are just
	// dropped), and the controlled side adds it at once without an
	// endpoint: it answers the controller's handshake, learning the
	// endpoint from it, and adopts the path itself shortly after (adoptDelay).
	allowed := c.cfg.AllowedIPs
	configured := !c.controlling()
	if configured {
		if err := c.wg.SetPeer(wg.Peer{Key: c.cfg.Remote, AllowedIPs: allowed}); err != nil {
			c.log.Error("configure WireGuard peer", "err", err)
		}
	}
	gen := 0
	var s *session
	defer func() { c.closeSession(s) }()
	c.rl.backoff = time.Second
	defer c.closeRelay(&c.rl)
	defer c.closePortPunch()
	c.startRelay(ctx, &c.rl)

	offerEvery := 2 * time.Second
	offer := time.NewTimer(0)
	defer offer.Stop()
	restart := time.NewTimer(time.Hour)
	restart.Stop()
	defer restart.Stop()
	backoff := time.Second

	newSession := func() {
		c.closeSession(s)
		gen++
		var err error
		s, err = c.newSession(ctx, gen)
		if err != nil {
			c.log.Warn("ICE agent", "err", err)
			s = nil
			restart.Reset(backoff)
			return
		}
		if c.onICE || c.rl.pc == nil || !c.rl.adopted {
			// While the relay carries the traffic, a new ICE attempt does
			// not make the peer "Connecting": it stays connected, relayed.
			c.setStatus(func(st *Status) { *st = Status{State: "Connecting", Since: st.Since} })
		}
	}
	newSession()

	for {
		c.schedulePortPunch() // relayed with nothing direct: punch on a fresh port
		select {
		case <-ctx.Done():
			return
		case <-offer.C:
			if s != nil && s.remoteUfrag == "" {
				c.send(ctx, s, signalpb.Body_OFFER)
				offer.Reset(offerEvery)
				offerEvery = min(offerEvery*2, 10*time.Second)
			}
		case <-restart.C:
			newSession()
			offerEvery = 2 * time.Second
			offer.Reset(0)
		case ev := <-c.events:
			switch ev := ev.(type) {
			case allowedIPs:
				allowed = ev
				if configured {
					_ = c.wg.SetPeer(wg.Peer{Key: c.cfg.Remote, AllowedIPs: allowed})
				}
			case *signalpb.Body:
				if ev.GetType() == signalpb.Body_GO_IDLE {
					if c.onGoIdle(ev, s) {
						c.closePortPunch()
						c.pp.attempts = 0
						s = nil // closed by onGoIdle
						newSession()
						offerEvery = 2 * time.Second
						offer.Reset(offerEvery)
					}
					continue
				}
				if t := ev.GetType(); t == signalpb.Body_OFFER || t == signalpb.Body_ANSWER {
					c.noteRemoteSession(ev.GetSessionId())
					c.pp.remoteWiremesh = c.pp.remoteWiremesh || ev.GetWiremeshTurnPunch()
				}
				if ev.GetType() == signalpb.Body_CANDIDATE && strings.HasPrefix(ev.GetPayload(), portPunchPrefix) {
					c.onPortPunchAnnounce(ctx, ev.GetPayload())
					continue
				}
				if s == nil {
					continue
				}
				if t := ev.GetType(); t == signalpb.Body_OFFER || t == signalpb.Body_ANSWER {
					if a := ev.GetRelayServerAddress(); a != "" {
						if a != c.rl.remote && !c.controlling() && c.rl.pc != nil && c.rl.url != a {
							// The remote moved to another home relay: follow it.
							c.closeRelay(&c.rl)
						}
						c.rl.remote = a
						c.startRelay(ctx, &c.rl)
					}
					want := c.turnWanted(ev)
					if was := c.turnToRemote.Swap(want); want && !was && t == signalpb.Body_ANSWER && s.resent {
						// An offer is answered with every candidate below;
						// an answer resends every candidate (resendCandidates)
						// unless that already happened.
						c.sendCandidates(ctx, s, true)
					}
				}
				switch ev.GetType() {
				case signalpb.Body_OFFER:
					ufrag, pwd, ok := credentials(ev.GetPayload())
					if !ok {
						continue
					}
					if s.connecting && ufrag != s.remoteUfrag {
						// The remote started a new session: follow it.
						c.log.Debug("remote restarted ICE", "session", fmt.Sprintf("%x", ev.GetSessionId()))
						newSession()
						if s == nil {
							continue
						}
					}
					c.send(ctx, s, signalpb.Body_ANSWER)
					c.startConnect(ctx, s, ufrag, pwd)
				case signalpb.Body_ANSWER:
					ufrag, pwd, ok := credentials(ev.GetPayload())
					if ok && !s.connecting {
						c.startConnect(ctx, s, ufrag, pwd)
					}
					if ok {
						c.resendCandidates(ctx, s)
					}
				case signalpb.Body_CANDIDATE:
					c.addCandidate(s, ev.GetPayload())
					if s.connecting {
						// Only once this session knows the remote's
						// credentials: a late candidate of the remote's
						// previous agent proves nothing about its next one.
						c.resendCandidates(ctx, s)
					}
				}
			case iceState:
				if s == nil || ev.gen != s.gen {
					continue
				}
				switch ev.s {
				case ice.ConnectionStateFailed, ice.ConnectionStateClosed:
					c.log.Info("ICE failed, restarting", "in", backoff)
					c.closeSession(s)
					s = nil
					if c.pp.direct != nil {
						// The punched path carries the pair, not ICE's.
					} else if c.onICE = false; !c.fallBackToRelay(&c.rl, allowed) {
						c.setStatus(func(st *Status) { *st = Status{State: "Connecting", Since: st.Since} })
					}
					restart.Reset(backoff)
					backoff = min(backoff*2, 8*time.Second)
				case ice.ConnectionStateDisconnected:
					// No stall: while ICE tries to recover, the relay carries.
					if c.pp.direct != nil {
						// The punched path carries the pair, not ICE's.
					} else if c.onICE && c.fallBackToRelay(&c.rl, allowed) {
						c.onICE = false
					} else if !c.onICE && c.rl.pc == nil {
						c.setStatus(func(st *Status) { st.State = "Connecting" })
					} else if c.onICE {
						c.setStatus(func(st *Status) { st.State = "Connecting" })
					}
				case ice.ConnectionStateConnected:
					if c.pp.direct != nil {
						// ICE's pair stays unused while the punched path carries.
					} else if s.conn != nil && !c.onICE && c.rl.pc != nil && (c.controlling() || s.adopted) {
						configured = c.usePath(s, allowed) || configured
					} else if s.connected {
						c.setStatus(func(st *Status) { st.State = "Connected" })
					}
				}
			case iceResult:
				if s == nil || ev.gen != s.gen {
					if ev.conn != nil {
						ev.conn.Close()
					}
					continue
				}
				if ev.err != nil {
					c.log.Debug("ICE did not connect", "err", ev.err)
					continue // the state callback schedules the restart
				}
				s.conn = ev.conn
				backoff = time.Second
				if c.pp.direct != nil {
					continue
				}
				if c.controlling() {
					configured = c.usePath(s, allowed) || configured
				} else {
					c.reportPath(s)
					gen := s.gen
					time.AfterFunc(adoptDelay, func() { c.post(adoptPath{gen: gen}) })
				}
			case probeEvent:
				if s != nil && c.pp.direct == nil {
					c.onProbe(s, ev, allowed)
				}
			case punchTick:
				if s != nil && ev.gen == s.gen {
					c.onPunchTick(s)
				}
			case pairChanged:
				if s != nil && ev.gen == s.gen && s.conn != nil && !s.punched && c.pp.direct == nil {
					if c.controlling() || s.adopted {
						configured = c.usePath(s, allowed) || configured
					} else {
						c.reportPath(s)
					}
				}
			case adoptPath:
				if s != nil && ev.gen == s.gen && s.conn != nil && c.pp.direct == nil {
					s.adopted = c.usePath(s, allowed)
				}
			case relayReady:
				// A connected ICE pair (adopted or about to be) outranks the relay.
				c.onRelayReady(ev, &c.rl, c.onICE || (s != nil && s.connected), allowed)
				if ev.gen == c.rl.gen && c.rl.pc != nil && c.onICE && s != nil && s.turnOnly && c.pp.direct == nil {
					// ICE went through TURN before the relay server was
					// ready: move to the relay as keepRelayOverTURN would
					// have, so that both sides settle on the same path.
					if c.useRelay(&c.rl, c.rl.endpoint, allowed) {
						c.onICE, s.keptRelay = false, true
					}
				}
				configured = configured || c.rl.adopted
			case relayLost:
				c.onRelayLost(ev, &c.rl, c.onICE)
			case relayRetry:
				c.startRelay(ctx, &c.rl)
			case portPunchStart:
				c.startPortPunch(ctx)
			case portPunchDone:
				c.onPortPunchDone(ev, allowed)
			case directCheck:
				c.onDirectCheck(ev, allowed)
			case adoptRelay:
				// Unless an ICE pair is in use or about to be: one that
				// stays second to the relay (TURN only) does not count.
				if ev.gen == c.rl.gen && c.rl.pc != nil && !c.onICE && (s == nil || !s.connected || s.keptRelay) {
					c.useRelay(&c.rl, c.rl.endpoint, allowed)
				}
			}
		}
	}
}

func credentials(payload string) (ufrag, pwd string, ok bool) {
	ufrag, pwd, ok = strings.Cut(payload, ":")
	return ufrag, pwd, ok && ufrag != "" && pwd != "" && !strings.Contains(pwd, ":")
}

func (c *Conn) newSession(ctx context.Context, gen int) (*session, error) {
	overlay := c.cfg.Overlay
	nw, err := newNet()
	if err != nil {
		return nil, err
	}
	usable := func(ip net.IP) bool {
		a, ok := netip.AddrFromSlice(ip)
		return ok && usableIP(a.Unmap(), overlay)
	}
	// Accept the first working path quickly (traffic should flow as soon as
	// any path works) and let renomination move to a better one later,
	// e.g. from TURN to a direct pair once its checks succeed.
	agent, err := ice.NewAgentWithOptions(
		ice.WithNet(nw),
		ice.WithUrls(c.cfg.URLs()),
		ice.WithNetworkTypes([]ice.NetworkType{ice.NetworkTypeUDP4}),
		ice.WithCandidateTypes([]ice.CandidateType{ice.CandidateTypeHost, ice.CandidateTypeServerReflexive, ice.CandidateTypeRelay}),
		ice.WithUDPMux(c.cfg.Mux),
		ice.WithUDPMuxSrflx(c.cfg.Mux),
		ice.WithMulticastDNSMode(ice.MulticastDNSModeDisabled),
		ice.WithFailedTimeout(8*time.Second),
		ice.WithDisconnectedTimeout(4*time.Second),
		ice.WithKeepaliveInterval(2*time.Second),
		ice.WithCheckInterval(200*time.Millisecond),
		ice.WithHostAcceptanceMinWait(0),
		ice.WithSrflxAcceptanceMinWait(100*time.Millisecond),
		ice.WithPrflxAcceptanceMinWait(200*time.Millisecond),
		ice.WithRelayAcceptanceMinWait(400*time.Millisecond),
		ice.WithIPFilter(usable),
		ice.WithRemoteIPFilter(usable),
	)
	if err != nil {
		return nil, err
	}
	s := &session{gen: gen, agent: agent, id: make([]byte, 5)}
	_, _ = rand.Read(s.id)
	if s.ufrag, s.pwd, err = agent.GetLocalUserCredentials(); err != nil {
		agent.Close()
		return nil, err
	}
	_ = agent.OnCandidate(func(cand ice.Candidate) {
		if cand == nil {
			return
		}
		payload := cand.Marshal()
		s.candMu.Lock()
		s.cands = append(s.cands, localCand{payload, cand.Type() == ice.CandidateTypeRelay})
		s.candMu.Unlock()
		if cand.Type() == ice.CandidateTypeRelay && !c.turnToRemote.Load() {
			return // kept for a remote that turns out to want it
		}
		go c.sendEach(ctx, s, []string{payload})
	})
	_ = agent.OnConnectionStateChange(func(st ice.ConnectionState) { c.post(iceState{gen: gen, s: st}) })
	_ = agent.OnSelectedCandidatePairChange(func(ice.Candidate, ice.Candidate) { c.post(pairChanged{gen: gen}) })
	if err := agent.GatherCandidates(); err != nil {
		agent.Close()
		return nil, err
	}
	return s, nil
}

func (c *Conn) closeSession(s *session) {
	if s == nil {
		return
	}
	s.punch.finish()
	if s.relayed {
		c.wg.Bind().Unrelay(c.cfg.Remote.String())
	}
	_ = s.agent.Close()
}

func (c *Conn) send(ctx context.Context, s *session, t signalpb.Body_Type) {
	body := &signalpb.Body{Type: t, Payload: s.ufrag + ":" + s.pwd, WgListenPort: uint32(c.cfg.WGPort),
		NetBirdVersion: c.cfg.Version, RosenpassConfig: &signalpb.RosenpassConfig{}, SessionId: s.id,
		WiremeshTurnPunch: true}
	if home := c.homeRelay(); home != "" {
		body.RelayServerAddress = &home
	}
	c.mu.Lock()
	c.sentSession = s.id
	c.mu.Unlock()
	// Candidates sent before the remote knew us were dropped by it (a
	// message from a peer not in its map is discarded), so every offer and
	// answer is followed by all candidates gathered so far.
	cands := c.candidates(s, false)
	go func() {
		if err := c.sig.Send(ctx, c.cfg.Remote, body); err != nil && ctx.Err() == nil {
			c.log.Debug("send", "type", t, "err", err)
			return
		}
		c.sendEach(ctx, s, cands)
	}()
}

// turnWanted reports whether our TURN candidates should go to the remote
// that sent b (an offer or answer): unless both sides have a relay server
// and the remote is not a wiremesh agent.
func (c *Conn) turnWanted(b *signalpb.Body) bool {
	return b.GetWiremeshTurnPunch() || b.GetRelayServerAddress() == "" || c.homeRelay() == ""
}

// homeRelay is our home relay's URL, "" while we have none.
func (c *Conn) homeRelay() string {
	if c.cfg.Relay == nil {
		return ""
	}
	return c.cfg.Relay.HomeURL()
}

// candidates returns the session's local candidates the remote may have
// (only the TURN ones with relayOnly).
func (c *Conn) candidates(s *session, relayOnly bool) []string {
	turn := c.turnToRemote.Load()
	s.candMu.Lock()
	defer s.candMu.Unlock()
	var out []string
	for _, lc := range s.cands {
		if (lc.relay && turn) || (!lc.relay && !relayOnly) {
			out = append(out, lc.payload)
		}
	}
	return out
}

// sendCandidates sends the session's candidates now (see candidates).
func (c *Conn) sendCandidates(ctx context.Context, s *session, relayOnly bool) {
	cands := c.candidates(s, relayOnly)
	go c.sendEach(ctx, s, cands)
}

// resendCandidates sends all our candidates once more, the first time the
// remote shows that its ICE agent for this session exists: it answered our
// offer, or sent a candidate (gathered by that agent). NetBird's client
// creates its agent asynchronously after an offer or answer arrives and
// drops candidates that come before ("ICE Agent is not initialized yet"):
// the ones sent right after our offer or answer, and the ones gathered
// while a restarted session's offer was still on its way, can all be lost.
// Without our server-reflexive candidate it never sends a check towards
// our NAT, and a pair behind address-restricted NATs stays relayed.
// Duplicates are harmless: ICE agents ignore a candidate they already have.
func (c *Conn) resendCandidates(ctx context.Context, s *session) {
	if s.resent {
		return
	}
	s.resent = true
	c.sendCandidates(ctx, s, false)
}

func (c *Conn) sendEach(ctx context.Context, s *session, cands []string) {
	for _, cand := range cands {
		if err := c.sig.Send(ctx, c.cfg.Remote, &signalpb.Body{Type: signalpb.Body_CANDIDATE, Payload: cand, SessionId: s.id}); err != nil {
			if ctx.Err() == nil {
				c.log.Debug("send candidate", "err", err)
			}
			return
		}
	}
}

func (c *Conn) startConnect(ctx context.Context, s *session, ufrag, pwd string) {
	if s.connecting || c.cfg.ForceRelay {
		return
	}
	s.connecting, s.remoteUfrag, s.remotePwd = true, ufrag, pwd
	agent, gen, controlling := s.agent, s.gen, c.controlling()
	go func() {
		var conn *ice.Conn
		var err error
		if controlling {
			conn, err = agent.Dial(ctx, ufrag, pwd)
		} else {
			conn, err = agent.Accept(ctx, ufrag, pwd)
		}
		c.post(iceResult{gen: gen, conn: conn, err: err})
	}()
}

func (c *Conn) addCandidate(s *session, payload string) {
	cand, err := ice.UnmarshalCandidate(strings.TrimPrefix(payload, "candidate:"))
	if err != nil {
		c.log.Debug("bad remote candidate", "payload", payload, "err", err)
		return
	}
	if cand.NetworkType() != ice.NetworkTypeUDP4 {
		return
	}
	if cand.Type() == ice.CandidateTypeServerReflexive && !s.punch.remote.IsValid() {
		if ip, err := netip.ParseAddr(cand.Address()); err == nil {
			s.punch.remote = netip.AddrPortFrom(ip.Unmap(), uint16(cand.Port()))
		}
	}
	if err := s.agent.AddRemoteCandidate(cand); err != nil {
		c.log.Debug("add remote candidate", "err", err)
	}
}

// keepalive keeps NAT mappings and TURN permissions of a path alive.
const keepalive = 25 * time.Second

// adoptDelay is how long the controlled side leaves the first handshake to
// the controlling one: more than a WAN round trip, less than WireGuard's
// 5 s retry.
const adoptDelay = 500 * time.Millisecond

// usePath points WireGuard at the selected pair and reports whether it did.
func (c *Conn) usePath(s *session, allowed []netip.Prefix) bool {
	pair, err := s.agent.GetSelectedCandidatePair()
	if err != nil || pair == nil {
		return false
	}
	local, remote := pair.Local, pair.Remote
	if c.keepRelayOverTURN(s, local, remote) {
		return true
	}
	var endpoint string
	s.turnOnly = local.Type() == ice.CandidateTypeRelay || remote.Type() == ice.CandidateTypeRelay
	if local.Type() == ice.CandidateTypeRelay {
		endpoint = c.wg.Bind().Relay(c.cfg.Remote.String(), s.conn)
		s.relayed = true
	} else {
		if s.relayed {
			c.wg.Bind().Unrelay(c.cfg.Remote.String())
			s.relayed = false
		}
		ip, err := netip.ParseAddr(remote.Address())
		if err != nil {
			return false
		}
		endpoint = netip.AddrPortFrom(ip, uint16(remote.Port())).String()
	}
	if err := c.wg.SetPeer(wg.Peer{Key: c.cfg.Remote, AllowedIPs: allowed, Endpoint: endpoint, Keepalive: keepalive}); err != nil {
		c.log.Error("set WireGuard endpoint", "endpoint", endpoint, "err", err)
		return false
	}
	c.onICE = true
	if c.rl.pc != nil {
		// The relayed path stays open as the fallback; what still arrives
		// on it must not pull WireGuard back to it.
		_ = c.wg.Bind().RedirectRelay(c.relayName(), endpoint)
	}
	c.log.Debug("WireGuard endpoint set", "endpoint", endpoint)
	c.reportPath(s)
	return true
}

// reportPath records the selected pair in the status.
func (c *Conn) reportPath(s *session) {
	pair, err := s.agent.GetSelectedCandidatePair()
	if err != nil || pair == nil {
		return
	}
	local, remote := pair.Local, pair.Remote
	if c.keepRelayOverTURN(s, local, remote) {
		return
	}
	if local.Type() == ice.CandidateTypeRelay && !s.relayed {
		// The controlled side receives over the relay before it adopts the
		// path: WireGuard must already be able to read from it.
		c.wg.Bind().Relay(c.cfg.Remote.String(), s.conn)
		s.relayed = true
	}
	s.connected = true
	relayed := local.Type() == ice.CandidateTypeRelay || remote.Type() == ice.CandidateTypeRelay
	if relayed {
		c.startPunch(s)
	}
	c.log.Info("peer connected", "local", local.Type().String(), "remote", remote.Type().String(), "relayed", relayed)
	c.setStatus(func(st *Status) {
		st.State, st.Relayed, st.RelayAddress = "Connected", relayed, ""
		st.LocalType, st.RemoteType = local.Type().String(), remote.Type().String()
		st.LocalEndpoint = net.JoinHostPort(local.Address(), fmt.Sprint(local.Port()))
		st.RemoteEndpoint = net.JoinHostPort(remote.Address(), fmt.Sprint(remote.Port()))
	})
}

// keepRelayOverTURN leaves the pair on the relay server when ICE could only
// connect through TURN: both are relays, and ours carries the traffic
// already, so switching would only cost a handshake. The TURN pair stays
// connected as a second fallback, and hole punching starts from it.
func (c *Conn) keepRelayOverTURN(s *session, local, remote ice.Candidate) bool {
	if c.rl.pc == nil || (local.Type() != ice.CandidateTypeRelay && remote.Type() != ice.CandidateTypeRelay) {
		return false
	}
	if !s.connected {
		c.log.Debug("ICE connected through TURN only; staying on the relay", "relay", c.rl.url)
	}
	s.connected, s.keptRelay = true, true
	c.startPunch(s)
	return true
}

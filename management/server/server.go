// Package server wires the management service together: store, server key,
// peer lifecycle, update fan-out, the gRPC API and a watcher that picks up
// changes made by other processes sharing the store (the admin command, or
// another management instance). It does not listen; the binaries do.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/wiremesh/wiremesh/dashboard"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/oidcop"
	"github.com/wiremesh/wiremesh/management/access"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/dnsadmin"
	"github.com/wiremesh/wiremesh/management/grpcapi"
	"github.com/wiremesh/wiremesh/management/httpapi"
	"github.com/wiremesh/wiremesh/management/idp"
	"github.com/wiremesh/wiremesh/management/jobs"
	"github.com/wiremesh/wiremesh/management/livefeed"
	"github.com/wiremesh/wiremesh/management/peerconns"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/releasecheck"
	"github.com/wiremesh/wiremesh/management/routing"
	"github.com/wiremesh/wiremesh/management/secretbox"
	"github.com/wiremesh/wiremesh/management/sshaudit"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/tenant"
	"github.com/wiremesh/wiremesh/management/turncreds"
	"github.com/wiremesh/wiremesh/management/updates"
	"github.com/wiremesh/wiremesh/management/users"
)

// Options configure management.
type Options struct {
	Store     store.Config
	Log       *slog.Logger
	Advertise grpcapi.Advertiser
	TURN      turncreds.Issuer
	Relay     grpcapi.RelayAuth
	// Poll is how often the store is checked for changes made elsewhere.
	Poll time.Duration
	// EphemeralTimeout is how long an ephemeral peer may stay offline
	// before it is removed (0: 10 minutes, as the reference).
	EphemeralTimeout time.Duration
	// Identity configures user login (none: setup keys only).
	Identity Identity
	// ExpiryCheck is how often expired peer logins are looked for (0: 5 s).
	ExpiryCheck time.Duration
	// MaxSyncs bounds Sync streams being set up at once (0: 1000).
	MaxSyncs int
	// SendBudget bounds the bytes of network maps built and not yet
	// written to their clients (0: grpcapi.DefaultSendBudget).
	SendBudget int64
	// JobFirstMessage bounds the wait for a Job stream's first message
	// (0: grpcapi.DefaultJobFirstMessage).
	JobFirstMessage time.Duration
	// TrustedProxies are reverse proxies whose X-Forwarded-For (HTTP) or
	// x-forwarded-for (gRPC metadata) names the client for the login and
	// setup-key limits; from any other peer the header is ignored.
	TrustedProxies []netip.Prefix
	// DashboardOrigins are the browser origins (scheme://host[:port]) the
	// REST API answers cross-origin (CORS); none by default. Check them
	// with httpapi.ParseOrigins.
	DashboardOrigins []string
	// Now is the gRPC API's clock (nil: time.Now); tests freeze it.
	Now func() time.Time
	// Instance names this process among management instances sharing a
	// Postgres store (empty: a random name). Instances heartbeat only on
	// Postgres: a SQLite store has one.
	Instance string
	// Heartbeat is how often the instance tells the store it is alive
	// (0: 3 s); an instance silent for InstanceTTL (0: 5 heartbeats) is
	// dead, and its peers are recorded offline by the survivors.
	Heartbeat, InstanceTTL time.Duration
	// Jobs tunes remote debug-bundle jobs (zero fields: the jobs package's
	// defaults); Store, Log and Now are set here.
	Jobs jobs.Options
	// Releases is the release check behind GET /api/instance/version
	// (nil: off, the available versions are reported unknown).
	Releases *releasecheck.Checker
	// Mail sends invitation e-mails (zero: none are sent).
	Mail Mail
}

// DefaultEphemeralTimeout is the offline time after which ephemeral peers go.
const DefaultEphemeralTimeout = 10 * time.Minute

// Server is a running management service.
type Server struct {
	Store *store.Store
	Peers *peers.Service
	Hub   *updates.Hub
	API   *grpcapi.Server
	Users *users.Service
	REST  *httpapi.API
	// Jobs runs remote debug-bundle jobs.
	Jobs *jobs.Service
	// IdP is the built-in identity provider (nil unless configured).
	IdP *oidcop.Provider
	// Dashboard serves the web app and /dashboard-config.json (Mount puts
	// it at /).
	Dashboard *dashboard.Handler
	// Live feeds the REST API's live event streams
	// (GET /api/events/stream); Close ends them.
	Live *livefeed.Feed

	log      *slog.Logger
	instance string
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	// Changes seen, by the poll and by store notifications.
	seenMu sync.Mutex
	seen   map[account.ID]uint64
	// listening is set while store notifications arrive, which makes the
	// poll a rare safety net; pollNow asks for one at once (after a
	// listener reconnect, for what was missed meanwhile).
	listening atomic.Bool
	pollNow   chan struct{}
}

const serverKeySetting = "server_private_key"

// Open opens the store and starts the change watcher.
func Open(ctx context.Context, o Options) (*Server, error) {
	if o.Poll <= 0 {
		o.Poll = 300 * time.Millisecond
	}
	if o.EphemeralTimeout <= 0 {
		o.EphemeralTimeout = DefaultEphemeralTimeout
	}
	st, err := store.Open(ctx, o.Store)
	if err != nil {
		return nil, err
	}
	priv, err := serverKey(ctx, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	if _, err := tenant.Default(ctx, st, time.Now()); err != nil {
		st.Close()
		return nil, err
	}
	if o.Instance == "" {
		o.Instance = instanceName()
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 3 * time.Second
	}
	if o.InstanceTTL <= 0 {
		o.InstanceTTL = 5 * o.Heartbeat
	}
	// One management process per SQLite store: streams do not survive its
	// restart, so whoever was connected is offline now, and there are no
	// other instances to tell it is alive. On Postgres the instance
	// registers; the others' heartbeats decide about their own peers.
	shared := st.Engine() != store.SQLite
	err = st.Tx(ctx, func(tx *store.Tx) error {
		now := time.Now().UnixNano()
		if !shared {
			return tx.MarkAllDisconnected(ctx, now)
		}
		_, err := tx.Heartbeat(ctx, o.Instance, now)
		return err
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	if o.ExpiryCheck <= 0 {
		o.ExpiryCheck = 5 * time.Second
	}
	hub := updates.NewHub()
	// Each domain service's changes wake the Sync streams (hub) and tell
	// the REST live streams which lists they may have changed.
	live := livefeed.New(livefeed.Options{})
	on := func(k livefeed.Kind) livefeed.Notifier { return livefeed.Notifier{Next: hub, Feed: live, Kinds: k} }
	ps := peers.New(st, on(livefeed.PeerServiceKinds), o.Log, nil)
	ps.Instance = o.Instance
	ps.States = live // online/offline, updates and deletions with their owner
	domains, err := users.ParseDomains(o.Identity.AccountDomains)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("account domains: %w", err)
	}
	inviteURL, err := o.Mail.inviteURL(o.Identity)
	if err != nil {
		st.Close()
		return nil, err
	}
	us := users.New(users.Options{Store: st, Notify: on(livefeed.UserServiceKinds), Log: o.Log, Mode: o.Identity.Mode, AccountDomains: domains, LocalIdP: o.Identity.BuiltInIssuer != "",
		Mailer: o.Mail.Mailer, InviteURL: inviteURL})
	var box *secretbox.Box
	if o.Identity.BuiltInIssuer != "" {
		if box, err = openSecrets(ctx, st, o.Store, o.Log); err != nil {
			st.Close()
			return nil, err
		}
	}
	provider, verifier, sso, err := openIdentity(ctx, st, o.Identity, us, box, o)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("identity provider: %w", err)
	}
	dash, err := openDashboard(o.Identity, provider)
	if err != nil {
		st.Close()
		return nil, err
	}
	jo := o.Jobs
	jo.Store, jo.Log, jo.Now = st, o.Log, o.Now
	js := jobs.New(jo)
	conns := peerconns.NewNotifying(func(acc account.ID, id account.PeerID) { live.PeerChanged(acc, id, "") }) // live, like connected: shared by gRPC (writes) and REST (reads)
	api := grpcapi.New(grpcapi.Options{Store: st, Peers: ps, Hub: hub, Conns: conns, ServerKey: priv, Advertise: o.Advertise, TURN: o.TURN, Relay: o.Relay, Log: o.Log, SSO: sso, MaxSyncs: o.MaxSyncs, SendBudget: o.SendBudget,
		TrustedProxies: o.TrustedProxies, Now: o.Now, JobFirstMessage: o.JobFirstMessage, Ended: ps, Jobs: js,
		SSHAudit: sshaudit.New(sshaudit.Options{Store: st, Now: o.Now, Written: func(acc account.ID) { live.Publish(acc, livefeed.Events) }})})
	ropts := httpapi.Options{Store: st, Users: us, Peers: ps, Access: access.New(st, on(livefeed.AccessServiceKinds), o.Log),
		Routing: routing.New(st, on(livefeed.RoutingServiceKinds), routing.Options{Log: o.Log}),
		DNS:     dnsadmin.New(st, on(livefeed.DNSServiceKinds), dnsadmin.Options{Log: o.Log}), Live: live, DashboardOrigins: o.DashboardOrigins, Log: o.Log,
		Jobs: js, TrustedProxies: o.TrustedProxies, Releases: o.Releases, Conns: conns}
	if verifier != nil {
		ropts.JWT = verifier
	}
	if provider != nil {
		ropts.IdPs = &idp.Providers{Store: st, Secrets: box}
	}
	wctx, cancel := context.WithCancel(context.Background())
	s := &Server{Store: st, Peers: ps, Hub: hub, API: api, Users: us, REST: httpapi.New(ropts), IdP: provider, Dashboard: dash, Jobs: js, Live: live, log: o.Log, cancel: cancel,
		instance: o.Instance, pollNow: make(chan struct{}, 1)}
	// Take the baseline now, so a change made between start-up and the
	// first poll is not mistaken for the starting state.
	seen, err := s.serials(ctx)
	if err != nil {
		cancel()
		st.Close()
		return nil, err
	}
	s.seen = seen
	s.wg.Add(4)
	go func() { defer s.wg.Done(); s.watch(wctx, o.Poll) }()
	go func() { defer s.wg.Done(); s.listen(wctx) }()
	go func() { defer s.wg.Done(); s.sweepEphemeral(wctx, o.EphemeralTimeout) }()
	go func() { defer s.wg.Done(); s.sweepLogins(wctx, o.ExpiryCheck) }()
	s.wg.Add(1)
	go func() { defer s.wg.Done(); js.Run(wctx) }()
	if shared {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.heartbeat(wctx, o.Heartbeat, o.InstanceTTL) }()
	}
	return s, nil
}

// Register adds the management service to g.
func (s *Server) Register(g *grpc.Server) { s.API.Register(g) }

// EndStreams ends the long-lived streams, the agents' Sync streams and
// the REST API's live event streams, and refuses new ones, so that an
// HTTP or gRPC server's graceful stop does not wait for them. Close calls
// it too; it is idempotent.
func (s *Server) EndStreams() {
	s.Live.Close()
	s.API.Close()
}

// Close ends streams, stops the watcher and closes the store. Call it after
// the gRPC server has stopped accepting.
func (s *Server) Close() error {
	s.EndStreams()
	s.cancel()
	s.wg.Wait()
	// Tell the other instances at once rather than after InstanceTTL.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Store.Tx(ctx, func(tx *store.Tx) error { return tx.RemoveInstance(ctx, s.instance, time.Now().UnixNano()) }); err != nil {
		s.log.Warn("deregister instance", "err", err)
	}
	return s.Store.Close()
}

func instanceName() string {
	h, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return h + "-" + hex.EncodeToString(b)
}

// serverKey loads the persisted server key, creating it once. Keeping it
// across restarts is harmless for clients (they fetch it before every call)
// and lets several instances on one store share it.
func serverKey(ctx context.Context, st *store.Store) (key.Private, error) {
	for {
		var v string
		err := st.Read(ctx, func(tx *store.Tx) error {
			var err error
			v, err = tx.Setting(ctx, serverKeySetting)
			return err
		})
		if err == nil {
			return key.ParsePrivate(v)
		}
		if !errors.Is(err, store.ErrNotFound) {
			return key.Private{}, fmt.Errorf("server key: %w", err)
		}
		k, err := key.NewPrivate()
		if err != nil {
			return key.Private{}, err
		}
		err = st.Tx(ctx, func(tx *store.Tx) error { return tx.InsertSetting(ctx, serverKeySetting, k.String()) })
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return key.Private{}, fmt.Errorf("server key: %w", err)
		}
	}
}

// watch wakes streams of accounts whose serial moved without us knowing,
// which is how changes by the admin command or another instance arrive
// when the store does not announce them (SQLite), and a safety net when it
// does. A new account counts as changed (its streams, if any, must look).
func (s *Server) watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if s.listening.Load() && time.Since(last) < safetyPoll {
				continue
			}
		case <-s.pollNow:
		}
		last = time.Now()
		now, err := s.serials(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("change watcher", "err", err)
			}
			continue
		}
		s.seenMu.Lock()
		var changed []account.ID
		for id, serial := range now {
			if old, ok := s.seen[id]; !ok || old < serial {
				changed = append(changed, id)
			}
		}
		s.seen = now
		s.seenMu.Unlock()
		for _, id := range changed {
			s.Hub.AccountChanged(id)
			s.Live.External(id, now[id])
		}
	}
}

// safetyPoll is how often the store is polled while its notifications
// arrive.
const safetyPoll = 10 * time.Second

// listen follows the store's change notifications (Postgres), reconnecting
// with backoff; after each (re)connect a poll catches what was missed.
func (s *Server) listen(ctx context.Context) {
	wait := 200 * time.Millisecond
	for {
		err := s.Store.Listen(ctx, func() {
			s.listening.Store(true)
			wait = 200 * time.Millisecond
			select {
			case s.pollNow <- struct{}{}:
			default:
			}
		}, s.changed)
		s.listening.Store(false)
		if errors.Is(err, store.ErrNoListen) || ctx.Err() != nil {
			return
		}
		s.log.Warn("store change notifications lost; polling until they return", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// changed handles one announced change: streams here are woken unless
// they already loaded that serial (the change was made here).
func (s *Server) changed(acc account.ID, serial uint64) {
	s.seenMu.Lock()
	if serial > s.seen[acc] {
		s.seen[acc] = serial
	}
	s.seenMu.Unlock()
	if loaded, ok := s.API.LoadedSerial(acc); ok && loaded >= serial {
		return
	}
	s.Hub.AccountChanged(acc)
	s.Live.External(acc, serial)
}

// heartbeat keeps this instance registered in the store and records the
// peers of instances that stopped beating as offline.
func (s *Server) heartbeat(ctx context.Context, every, ttl time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		var (
			reaped  int64
			revived bool
		)
		err := s.Store.Tx(ctx, func(tx *store.Tx) error {
			var err error
			if revived, err = tx.Heartbeat(ctx, s.instance, now.UnixNano()); err != nil {
				return err
			}
			reaped, err = tx.ReapInstances(ctx, now.Add(-ttl).UnixNano(), now.UnixNano())
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("instance heartbeat", "err", err)
			}
			continue
		}
		if reaped > 0 {
			s.log.Info("peers of a stopped management instance recorded offline", "peers", reaped)
		}
		if revived {
			// The others took this instance for dead while its heartbeats
			// failed (the store was unreachable): its peers are still here.
			s.log.Warn("this instance was taken for dead; recording its peers online again", "streams", s.Hub.Connected())
			if err := s.Peers.MarkOnline(ctx, s.Hub.Subscribed()); err != nil && ctx.Err() == nil {
				s.log.Warn("record peers online", "err", err)
			}
		}
	}
}

// sweepEphemeral removes ephemeral peers offline for longer than timeout.
func (s *Server) sweepEphemeral(ctx context.Context, timeout time.Duration) {
	t := time.NewTicker(max(timeout/10, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var stale []account.Peer
		err := s.Store.Read(ctx, func(tx *store.Tx) error {
			var err error
			stale, err = tx.StaleEphemeralPeers(ctx, time.Now().Add(-timeout).UnixNano())
			return err
		})
		if err != nil {
			continue
		}
		for _, p := range stale {
			// Another instance (or the admin) may have removed it already.
			if err := s.Peers.Delete(ctx, p.AccountID, p.ID, "ephemeral-sweeper"); err == nil {
				s.log.Info("removed offline ephemeral peer", "peer", p.ID, "name", p.Name)
			}
		}
		// Temporary peers that never connected (or whose removal on
		// disconnect was missed) go after peers.TemporaryOffline.
		if err := s.Peers.ExpireTemporary(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("temporary peer expiry", "err", err)
		}
	}
}

// sweepLogins announces expired peer logins, so maps drop those peers.
func (s *Server) sweepLogins(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	seen, inactive := map[account.PeerID]time.Time{}, map[account.PeerID]time.Time{}
	// Logins that expired before the start are out of every map already
	// (maps are computed fresh): look from now on.
	since := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if err := s.Peers.ExpireLogins(ctx, since, seen); err != nil {
			if ctx.Err() == nil {
				s.log.Warn("login expiry sweep", "err", err)
			}
			continue // the same window again next time
		}
		if err := s.Peers.ExpireInactive(ctx, since, inactive); err != nil {
			if ctx.Err() == nil {
				s.log.Warn("inactivity expiry sweep", "err", err)
			}
			continue
		}
		since = now
	}
}

func (s *Server) serials(ctx context.Context) (map[account.ID]uint64, error) {
	var out map[account.ID]uint64
	err := s.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		out, err = tx.Serials(ctx)
		return err
	})
	return out, err
}

// Advertiser advertises fixed ports under either a configured public host
// or the host the client dialed.
type Advertiser struct {
	PublicHost string // empty: use the dialed host
	SignalHost string // empty: the public/dialed host
	SignalPort int
	SignalTLS  bool
	STUNPort   int  // 0: no embedded STUN
	TURNPort   int  // 0: no embedded TURN
	RelayPort  int  // 0: no embedded relay (rel://host:port, WebSocket on the main port)
	RelayTLS   bool // the embedded relay is rels://
	ExtraSTUNs []string
	ExtraTURNs []string
	Relays     []string // separate relays, rel:// or rels:// URLs
}

// Advertise implements grpcapi.Advertiser.
func (a Advertiser) Advertise(dialed string) grpcapi.Endpoints {
	host := a.PublicHost
	if host == "" {
		host = dialed
	}
	if host == "" {
		host = "127.0.0.1"
	}
	sh := a.SignalHost
	if sh == "" {
		sh = host
	}
	ep := grpcapi.Endpoints{Signal: net.JoinHostPort(sh, strconv.Itoa(a.SignalPort)), SignalTLS: a.SignalTLS}
	hp := net.JoinHostPort(host, strconv.Itoa(a.STUNPort))
	if a.STUNPort != 0 {
		ep.STUNs = append(ep.STUNs, "stun:"+hp)
	}
	if a.TURNPort != 0 {
		ep.TURNs = append(ep.TURNs, "turn:"+net.JoinHostPort(host, strconv.Itoa(a.TURNPort))+"?transport=udp")
	}
	if a.RelayPort != 0 {
		scheme := "rel://"
		if a.RelayTLS {
			scheme = "rels://"
		}
		ep.Relays = append(ep.Relays, scheme+net.JoinHostPort(host, strconv.Itoa(a.RelayPort)))
	}
	ep.Relays = append(ep.Relays, a.Relays...)
	ep.STUNs = append(ep.STUNs, a.ExtraSTUNs...)
	ep.TURNs = append(ep.TURNs, a.ExtraTURNs...)
	return ep
}

// Healthy reports whether the store answers (a quick schema query).
func (s *Server) Healthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := s.Store.SchemaVersion(ctx)
	return err
}

// Listening reports whether store change notifications arrive (Postgres),
// rather than changes by other processes being polled for.
func (s *Server) Listening() bool { return s.listening.Load() }

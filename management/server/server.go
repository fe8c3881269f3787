// Package server wires the management service together: store, server key,
// peer lifecycle, update fan-out, the gRPC API and a watcher that picks up
// changes made by other processes sharing the store (the admin command, or
// another management instance). It does not listen; the binaries do.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/oidcop"
	"github.com/wiremesh/wiremesh/management/access"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/grpcapi"
	"github.com/wiremesh/wiremesh/management/httpapi"
	"github.com/wiremesh/wiremesh/management/peers"
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
	// IdP is the built-in identity provider (nil unless configured).
	IdP *oidcop.Provider

	log    *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup
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
	// Streams do not survive a restart: whoever was connected is offline now.
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.MarkAllDisconnected(ctx, time.Now().UnixNano()) }); err != nil {
		st.Close()
		return nil, err
	}
	if o.ExpiryCheck <= 0 {
		o.ExpiryCheck = 5 * time.Second
	}
	hub := updates.NewHub()
	ps := peers.New(st, hub, o.Log, nil)
	us := users.New(users.Options{Store: st, Notify: hub, Log: o.Log, Mode: o.Identity.Mode, LocalIdP: o.Identity.BuiltInIssuer != ""})
	provider, verifier, sso, err := openIdentity(ctx, st, o.Identity, us, o)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("identity provider: %w", err)
	}
	api := grpcapi.New(grpcapi.Options{Store: st, Peers: ps, Hub: hub, ServerKey: priv, Advertise: o.Advertise, TURN: o.TURN, Relay: o.Relay, Log: o.Log, SSO: sso, MaxSyncs: o.MaxSyncs})
	ropts := httpapi.Options{Store: st, Users: us, Peers: ps, Access: access.New(st, hub, o.Log), Log: o.Log}
	if verifier != nil {
		ropts.JWT = verifier
	}
	wctx, cancel := context.WithCancel(context.Background())
	s := &Server{Store: st, Peers: ps, Hub: hub, API: api, Users: us, REST: httpapi.New(ropts), IdP: provider, log: o.Log, cancel: cancel}
	// Take the baseline now, so a change made between start-up and the
	// first poll is not mistaken for the starting state.
	seen, err := s.serials(ctx)
	if err != nil {
		cancel()
		st.Close()
		return nil, err
	}
	s.wg.Add(3)
	go func() { defer s.wg.Done(); s.watch(wctx, o.Poll, seen) }()
	go func() { defer s.wg.Done(); s.sweepEphemeral(wctx, o.EphemeralTimeout) }()
	go func() { defer s.wg.Done(); s.sweepLogins(wctx, o.ExpiryCheck) }()
	return s, nil
}

// Register adds the management service to g.
func (s *Server) Register(g *grpc.Server) { s.API.Register(g) }

// Close ends streams, stops the watcher and closes the store. Call it after
// the gRPC server has stopped accepting.
func (s *Server) Close() error {
	s.API.Close()
	s.cancel()
	s.wg.Wait()
	return s.Store.Close()
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
// which is how changes by the admin command or another instance arrive.
// A new account counts as changed (its streams, if any, must look).
func (s *Server) watch(ctx context.Context, every time.Duration, seen map[account.ID]uint64) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, err := s.serials(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("change watcher", "err", err)
			}
			continue
		}
		for id, serial := range now {
			if old, ok := seen[id]; !ok || old != serial {
				s.Hub.AccountChanged(id)
			}
		}
		seen = now
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
	}
}

// sweepLogins announces expired peer logins, so maps drop those peers.
func (s *Server) sweepLogins(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	seen := map[account.PeerID]time.Time{}
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

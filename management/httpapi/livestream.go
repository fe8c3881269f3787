package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/livefeed"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/users"
)

// GET /api/events/stream is a wiremesh extension (NetBird has none): a
// Server-Sent Events stream telling the caller which lists of its account
// changed, so a dashboard or script refetches them through the normal
// endpoints instead of polling. Events carry no data but the account's
// revision; each kind reaches only callers whose role reads every object
// of its module, except peers, which a caller that sees only its own
// peers hears for changes of those peers alone.

// LiveTiming tunes the live event streams (zero fields: the defaults).
type LiveTiming struct {
	// Coalesce is the least time between two events of a stream (0:
	// 250 ms): a burst of changes is one event per kind.
	Coalesce time.Duration
	// Heartbeat is how often an idle stream sends a comment so proxies
	// keep it open (0: 20 s).
	Heartbeat time.Duration
	// Recheck is how often the caller's credentials are checked again
	// (0: 10 s): a stream ends when its token expires or is revoked or
	// its user is blocked, deleted or loses its role.
	Recheck time.Duration
}

func (t LiveTiming) withDefaults() LiveTiming {
	if t.Coalesce <= 0 {
		t.Coalesce = 250 * time.Millisecond
	}
	if t.Heartbeat <= 0 {
		t.Heartbeat = 20 * time.Second
	}
	if t.Recheck <= 0 {
		t.Recheck = 10 * time.Second
	}
	return t
}

// errNoLive: the server was built without a feed.
var errNoLive = fmt.Errorf("%w: live event streams are not enabled on this server", errNoRoute)

// kindModules is the module whose read grant a kind needs. Account
// (settings changed) reaches every caller: it says nothing of others'
// objects, and the caller's own permissions may depend on it.
var kindModules = map[livefeed.Kind][]auth.Module{
	livefeed.Peers:     {auth.Peers},
	livefeed.Groups:    {auth.Groups},
	livefeed.Policies:  {auth.Policies},
	livefeed.SetupKeys: {auth.SetupKeys},
	livefeed.Users:     {auth.Users},
	livefeed.Routes:    {auth.Routes},
	livefeed.Networks:  {auth.Networks},
	livefeed.DNS:       {auth.DNS, auth.Nameservers},
	livefeed.Events:    {auth.Events},
}

// audible is the kinds the caller hears account-wide: those whose
// module it reads in full.
func audible(caller account.User) livefeed.Kind {
	k := livefeed.Account
	for kind, mods := range kindModules {
		for _, m := range mods {
			if seesAll(caller, m) {
				k |= kind
				break
			}
		}
	}
	return k
}

// eventStream serves GET /api/events/stream.
func (a *API) eventStream(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if a.o.Live == nil {
		return errNoLive
	}
	sub, err := a.o.Live.Subscribe(caller.AccountID, caller.ID)
	if err != nil {
		return err
	}
	defer sub.Close()
	s := &liveStream{a: a, w: w, rc: http.NewResponseController(w), r: r, caller: caller, sub: sub, t: a.o.LiveTiming.withDefaults()}
	return s.run(r.Context())
}

// liveStream is one open stream; its state is owned by the request's
// goroutine.
type liveStream struct {
	a      *API
	w      http.ResponseWriter
	rc     *http.ResponseController
	r      *http.Request
	caller account.User
	sub    *livefeed.Sub
	t      LiveTiming
	// serial is the highest network serial the client was told.
	serial uint64
}

// writeTimeout bounds one write to a stream's client: a client that
// stops reading is dropped rather than holding the stream.
const writeTimeout = 30 * time.Second

func (s *liveStream) run(ctx context.Context) error {
	serial, rev, err := s.revision(ctx)
	if err != nil {
		return err
	}
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	s.w.WriteHeader(http.StatusOK)
	// retry: what an EventSource waits before reconnecting; ready: the
	// stream is live, so a client refetches what it showed meanwhile.
	if err := s.write("retry: 2000\n" + event("ready", serial, rev)); err != nil {
		return nil
	}
	s.serial = serial
	beat := time.NewTicker(s.t.Heartbeat)
	defer beat.Stop()
	check := time.NewTicker(s.t.Recheck)
	defer check.Stop()
	var (
		last  time.Time
		flush *time.Timer
		fire  <-chan time.Time
	)
	defer func() {
		if flush != nil {
			flush.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.sub.Done():
			_ = s.write(": server shutting down\n\n")
			return nil
		case <-beat.C:
			if err := s.write(": ping\n\n"); err != nil {
				return nil
			}
		case <-check.C:
			if err := s.recheck(ctx); err != nil {
				s.end(err)
				return nil
			}
		case <-s.sub.Wake():
			if fire != nil {
				continue // a flush is due already
			}
			flush = time.NewTimer(max(time.Until(last.Add(s.t.Coalesce)), 0))
			fire = flush.C
		case <-fire:
			fire, flush = nil, nil
			last = time.Now()
			if !s.flush(ctx) {
				return nil
			}
		}
	}
}

// flush sends what is pending that the caller may hear, one event per
// kind; false ends the stream. A store error ends it too: the client
// reconnects and, on ready, refetches everything, so nothing is lost.
func (s *liveStream) flush(ctx context.Context) bool {
	serial, rev, err := s.revision(ctx)
	if err != nil {
		s.warn(ctx, err)
		return false
	}
	p := s.sub.Take()
	if p.Kinds&(livefeed.Users|livefeed.Account) != 0 || p.Serial > s.serial {
		// Users or settings changed (or something elsewhere): it may be
		// this caller's block, role change or token's revocation.
		if err := s.recheck(ctx); err != nil {
			s.end(err)
			return false
		}
	}
	kinds, err := s.kinds(ctx, p)
	if err != nil {
		s.warn(ctx, err)
		return false
	}
	// What this caller may hear of serial is decided: a change elsewhere
	// up to it is no news.
	s.serial = max(s.serial, serial)
	if kinds == 0 {
		return true
	}
	var out string
	kinds.Each(func(k livefeed.Kind) { out += event(k.String(), serial, rev) })
	return s.write(out) == nil
}

func (s *liveStream) warn(ctx context.Context, err error) {
	if ctx.Err() == nil {
		s.a.o.Log.WarnContext(ctx, "live event stream ended on a store error", "account", s.caller.AccountID, "err", err)
	}
}

// kinds is what of p the caller may hear.
func (s *liveStream) kinds(ctx context.Context, p livefeed.Pending) (livefeed.Kind, error) {
	if p.Serial > s.serial {
		// Changed elsewhere, and not yet told: what is unknown.
		p.Kinds |= livefeed.AllKinds
	}
	k := p.Kinds & audible(s.caller)
	if p.Kinds&livefeed.Peers != 0 || len(p.Peers) > 0 || p.ManyPeers {
		switch auth.Can(s.caller, auth.Peers, auth.Read) {
		case auth.All:
			k |= livefeed.Peers
		case auth.Own:
			// Account-wide peer changes (p.Kinds) are not told: they may
			// be anyone's. A peer's own change is, when the peer is the
			// caller's.
			mine, err := s.ownsAny(ctx, p)
			if err != nil {
				return 0, err
			}
			if mine {
				k |= livefeed.Peers
			}
		}
	}
	return k, nil
}

// ownsAny reports whether one of p's peers is the caller's (any of its
// peers when p knows only that many changed). A peer gone meanwhile is
// not.
func (s *liveStream) ownsAny(ctx context.Context, p livefeed.Pending) (bool, error) {
	if len(p.Peers) == 0 && !p.ManyPeers {
		return false, nil
	}
	mine := false
	err := s.a.o.Store.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(s.caller.AccountID)
		if p.ManyPeers {
			ps, err := at.Peers(ctx)
			if err != nil {
				return err
			}
			for _, pr := range ps {
				if pr.UserID == s.caller.ID {
					mine = true
					return nil
				}
			}
			return nil
		}
		for id := range p.Peers {
			pr, err := at.Peer(ctx, id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if pr.UserID == s.caller.ID {
				mine = true
				return nil
			}
		}
		return nil
	})
	return mine, err
}

// recheck authenticates the stream's request again: its token may have
// expired or been revoked, its user blocked, deleted or given another
// role (which the stream then follows).
func (s *liveStream) recheck(ctx context.Context) error {
	u, err := s.a.authenticate(s.r)
	if err != nil {
		return err
	}
	if u.ID != s.caller.ID || u.AccountID != s.caller.AccountID {
		return fmt.Errorf("%w: the credentials now name another user", users.ErrUnauthenticated)
	}
	if err := authorize(Route{Method: http.MethodGet, Path: EventStreamPath}, u); err != nil {
		return err
	}
	s.caller = u
	return nil
}

// EventStreamPath is the live event stream's route.
const EventStreamPath = "/api/events/stream"

// end tells the client why the stream ends; it reconnects only to learn
// the status (401, 403).
func (s *liveStream) end(err error) {
	msg := "the credentials are no longer valid"
	if errors.Is(err, users.ErrBlocked) {
		msg = "user is blocked"
	} else if errors.Is(err, users.ErrForbidden) {
		msg = "the caller's role may no longer use this stream"
	}
	_ = s.write(fmt.Sprintf("event: end\ndata: {\"message\":%q}\n\n", msg))
}

// revision reads the account's network serial and view revision.
func (s *liveStream) revision(ctx context.Context) (serial, rev uint64, err error) {
	err = s.a.o.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		serial, rev, err = tx.In(s.caller.AccountID).ViewRevision(ctx)
		return err
	})
	return serial, rev, err
}

// event is one event of a stream, the account's serial and revision its
// data.
func event(name string, serial, rev uint64) string {
	return fmt.Sprintf("event: %s\ndata: {\"serial\":%d,\"revision\":%d}\n\n", name, serial, rev)
}

func (s *liveStream) write(msg string) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := s.w.Write([]byte(msg)); err != nil {
		return err
	}
	return s.rc.Flush()
}

// writeKinds is what a successful write through a route of a module may
// have changed, for the live streams: the lists that show it.
var writeKinds = map[auth.Module]livefeed.Kind{
	auth.Peers:             livefeed.Peers | livefeed.Groups | livefeed.Policies,
	auth.RemoteJobs:        livefeed.Peers,
	auth.Groups:            livefeed.Groups | livefeed.Peers,
	auth.Policies:          livefeed.Policies,
	auth.SetupKeys:         livefeed.SetupKeys,
	auth.Users:             livefeed.Users | livefeed.Peers,
	auth.Pats:              livefeed.Users,
	auth.Routes:            livefeed.Routes,
	auth.Networks:          livefeed.Networks | livefeed.Groups,
	auth.DNS:               livefeed.DNS,
	auth.Nameservers:       livefeed.DNS,
	auth.Settings:          livefeed.Account | livefeed.Peers,
	auth.Accounts:          livefeed.Account,
	auth.IdentityProviders: livefeed.Account,
}

// announce tells the caller's account's live streams of a write that
// succeeded through rt. The domain services announce the changes they
// notify (whichever door they come in by); this covers the writes they
// do not notify because no network changed (invitations, tokens, a
// user's name...), and names the kinds exactly. Every write is logged,
// so the activity log changed too.
func (a *API) announce(rt Route, caller account.User) {
	if a.o.Live == nil || rt.Public || caller.AccountID == "" || rt.Method == http.MethodGet {
		return
	}
	k := livefeed.Events | livefeed.Users // a route of the caller's own (password)
	if p, ok := permOf(rt); ok && !p.self {
		k = livefeed.Events | writeKinds[p.module]
	}
	a.o.Live.Publish(caller.AccountID, k)
}

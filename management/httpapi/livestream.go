package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
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
	// (0: 10 s): a stream ends when its token expires or is revoked, its
	// user is blocked or deleted, or what it may hear changes (its role,
	// or regular_users_view_blocked for a regular user). A change of the
	// users or settings is checked sooner, at most once per
	// MinRecheck.
	Recheck time.Duration
	// MinRecheck is the least time between two checks (0: 1 s), so that a
	// burst of user or settings changes in a large account does not make
	// every stream of it read the store each time.
	MinRecheck time.Duration
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
	if t.MinRecheck <= 0 {
		t.MinRecheck = time.Second
	}
	return t
}

// errNoLive: the server was built without a feed.
var errNoLive = fmt.Errorf("%w: live event streams are not enabled on this server", errNoRoute)

// errScopeChanged ends a stream whose caller's role (or view block)
// changed: the client reconnects, refetches everything, its own user
// included, and hears from then on what the new role may.
var errScopeChanged = errors.New("the caller's role or the account's regular_users_view_blocked changed")

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

// liveScope is what a stream's caller hears.
type liveScope struct {
	// kinds are heard account-wide.
	kinds livefeed.Kind
	// own: of peers, only changes of the caller's own (peers is then
	// not in kinds); neither: no peer changes.
	own bool
}

// scopeOf is what caller hears: the kinds whose module it reads in full,
// and its own peers when it reads only those. blocked (viewBlocked) leaves
// what viewGate lets through: the account's settings and its own peers,
// whatever a service user's role would read.
func scopeOf(caller account.User, blocked bool) liveScope {
	if blocked {
		return liveScope{kinds: livefeed.Account, own: true}
	}
	sc := liveScope{kinds: livefeed.Account}
	for kind, mods := range kindModules {
		for _, m := range mods {
			if seesAll(caller, m) {
				sc.kinds |= kind
				break
			}
		}
	}
	sc.own = sc.kinds&livefeed.Peers == 0 && auth.Can(caller, auth.Peers, auth.Read) == auth.Own
	return sc
}

// eventStream serves GET /api/events/stream.
func (a *API) eventStream(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if a.o.Live == nil {
		return errNoLive
	}
	blocked, err := a.viewBlocked(r.Context(), caller)
	if err != nil {
		return err
	}
	sub, err := a.o.Live.Subscribe(caller.AccountID, caller.ID)
	if err != nil {
		return err
	}
	defer sub.Close()
	s := &liveStream{a: a, w: w, rc: http.NewResponseController(w), r: r, caller: caller, blocked: blocked, sub: sub,
		t: a.o.LiveTiming.withDefaults(), now: time.Now}
	return s.run(r.Context())
}

// liveStream is one open stream; its state is owned by the request's
// goroutine.
type liveStream struct {
	a       *API
	w       http.ResponseWriter
	rc      *http.ResponseController
	r       *http.Request
	caller  account.User
	blocked bool // viewBlocked(caller), as last checked
	sub     *livefeed.Sub
	t       LiveTiming
	now     func() time.Time
	// serial is the highest network serial the client was told.
	serial uint64
	// checked is when a change of users or settings last made the
	// stream check the credentials (the periodic check does not count:
	// it may predate the change).
	checked time.Time
	// own are the caller's peers, for changes whose publisher did not
	// name the owner; nil: not known (read when needed, dropped when
	// the peer list changes).
	own map[account.PeerID]struct{}
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
				s.end(ctx, err)
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
			again, err := s.flush(ctx)
			if err != nil {
				return nil
			}
			if again > 0 {
				// A check was due sooner than MinRecheck allows: flush
				// (and check) again then.
				flush = time.NewTimer(again)
				fire = flush.C
			}
		}
	}
}

// flush sends what is pending that the caller may hear, one event per
// kind. A non-nil error ends the stream (it was told why, or a store
// error was logged: the client reconnects and, on ready, refetches
// everything, so nothing is lost). again > 0: users or settings changed
// but the credentials were checked less than MinRecheck ago, so nothing
// was sent: flush again after it.
func (s *liveStream) flush(ctx context.Context) (again time.Duration, err error) {
	p := s.sub.Take()
	if p.Kinds&(livefeed.Users|livefeed.Account) != 0 || p.Serial > s.serial {
		// Users or settings changed (or something elsewhere): it may be
		// this caller's block, role change, the view block or the
		// token's revocation, which must be known before telling.
		if wait := s.checked.Add(s.t.MinRecheck).Sub(s.now()); wait > 0 {
			s.sub.Requeue(p)
			return wait, nil
		}
		s.checked = s.now()
		if err := s.recheck(ctx); err != nil {
			s.end(ctx, err)
			return 0, err
		}
	}
	serial, rev, err := s.revision(ctx)
	if err != nil {
		s.warn(ctx, err)
		return 0, err
	}
	kinds, err := s.kinds(ctx, p)
	if err != nil {
		s.warn(ctx, err)
		return 0, err
	}
	// What this caller may hear of serial is decided: a change elsewhere
	// up to it is no news.
	s.serial = max(s.serial, serial)
	if kinds == 0 {
		return 0, nil
	}
	var out string
	kinds.Each(func(k livefeed.Kind) { out += event(k.String(), serial, rev) })
	return 0, s.write(out)
}

func (s *liveStream) warn(ctx context.Context, err error) {
	if ctx.Err() == nil {
		s.a.o.Log.WarnContext(ctx, "live event stream ended on a store error", "account", s.caller.AccountID, "err", err)
	}
}

// kinds is what of p the caller may hear.
func (s *liveStream) kinds(ctx context.Context, p livefeed.Pending) (livefeed.Kind, error) {
	if p.Kinds&livefeed.Peers != 0 {
		// Someone's peers were added, removed or moved: perhaps the
		// caller's.
		s.own = nil
	}
	if p.Serial > s.serial {
		// Changed elsewhere, and not yet told: what is unknown.
		p.Kinds |= livefeed.AllKinds
		s.own = nil
	}
	sc := scopeOf(s.caller, s.blocked)
	k := p.Kinds & sc.kinds
	if len(p.Peers) > 0 || p.ManyPeers {
		if sc.kinds&livefeed.Peers != 0 {
			k |= livefeed.Peers
		} else if sc.own {
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

// ownsAny reports whether one of p's peers is the caller's: by the owner
// its publisher named, else by the caller's peers as last read (any of
// them when p knows only that many changed).
func (s *liveStream) ownsAny(ctx context.Context, p livefeed.Pending) (bool, error) {
	need := p.ManyPeers
	for _, owner := range p.Peers {
		if owner == s.caller.ID {
			// It may have been deleted or handed over: read again
			// next time.
			s.own = nil
			return true, nil
		}
		need = need || owner == ""
	}
	if !need {
		return false, nil
	}
	if err := s.loadOwn(ctx); err != nil {
		return false, err
	}
	if p.ManyPeers {
		return len(s.own) > 0, nil
	}
	for id, owner := range p.Peers {
		if _, ok := s.own[id]; ok && owner == "" {
			return true, nil
		}
	}
	return false, nil
}

// loadOwn reads the caller's peers unless known.
func (s *liveStream) loadOwn(ctx context.Context) error {
	if s.own != nil {
		return nil
	}
	own := map[account.PeerID]struct{}{}
	err := s.a.o.Store.Read(ctx, func(tx *store.Tx) error {
		ps, err := tx.In(s.caller.AccountID).Peers(ctx)
		if err != nil {
			return err
		}
		for _, pr := range ps {
			if pr.UserID == s.caller.ID {
				own[pr.ID] = struct{}{}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.own = own
	return nil
}

// recheck checks the stream's credentials again, reading only: its token
// may have expired or been revoked, its user blocked or deleted. A caller
// whose role (or view block) changed is ended (errScopeChanged): its
// client reconnects and learns its new permissions.
func (s *liveStream) recheck(ctx context.Context) error {
	u, err := s.a.checkCredentials(ctx, s.r)
	if err != nil {
		return err
	}
	if u.ID != s.caller.ID || u.AccountID != s.caller.AccountID {
		return fmt.Errorf("%w: the credentials now name another user", users.ErrUnauthenticated)
	}
	blocked, err := s.a.viewBlocked(ctx, u)
	if err != nil {
		return err
	}
	if u.Role != s.caller.Role || u.ServiceUser != s.caller.ServiceUser || blocked != s.blocked {
		return errScopeChanged
	}
	s.caller = u
	return nil
}

// checkCredentials is authenticate for a request already authenticated
// once (a live stream's): it verifies the token again but only reads the
// store (users.CheckPAT, users.CheckClaims).
func (a *API) checkCredentials(ctx context.Context, r *http.Request) (account.User, error) {
	h := r.Header.Get("Authorization")
	scheme, cred, _ := strings.Cut(h, " ")
	cred = strings.TrimSpace(cred)
	switch {
	case strings.EqualFold(scheme, "Token") || (strings.EqualFold(scheme, "Bearer") && strings.HasPrefix(cred, auth.PATPrefix)):
		return a.o.Users.CheckPAT(ctx, cred)
	case strings.EqualFold(scheme, "Bearer") && a.o.JWT != nil:
		c, err := a.o.JWT.Verify(ctx, cred)
		if err != nil {
			if errors.Is(err, auth.ErrIdPUnusable) {
				return account.User{}, err
			}
			return account.User{}, fmt.Errorf("%w: %w", users.ErrUnauthenticated, err)
		}
		return a.o.Users.CheckClaims(ctx, c)
	}
	return account.User{}, fmt.Errorf("%w: the stream's credentials are no longer accepted", users.ErrUnauthenticated)
}

// EventStreamPath is the live event stream's route.
const EventStreamPath = "/api/events/stream"

// endMessage is what an ending stream tells its client, and whether the
// cause is the server's (logged) rather than the caller's.
func endMessage(err error) (msg string, server bool) {
	switch {
	case errors.Is(err, users.ErrBlocked):
		return "user is blocked", false
	case errors.Is(err, errScopeChanged):
		return "the caller's permissions changed; reconnect to hear what they now allow", false
	case errors.Is(err, users.ErrForbidden):
		return "the caller's role may no longer use this stream", false
	case errors.Is(err, users.ErrUnauthenticated), errors.Is(err, users.ErrPendingApproval):
		return "the credentials are no longer valid", false
	}
	return "the server could not check the credentials (store or identity provider unavailable); reconnect", true
}

// end tells the client why the stream ends; it reconnects to learn the
// status (401, 403) or, after a role change or a server error, to go on.
func (s *liveStream) end(ctx context.Context, err error) {
	msg, server := endMessage(err)
	if server && ctx.Err() == nil {
		s.a.o.Log.WarnContext(ctx, "live event stream ended: its credentials could not be checked", "account", s.caller.AccountID, "user", s.caller.ID, "err", err)
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

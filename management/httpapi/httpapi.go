// Package httpapi is management's REST boundary, in the shapes of
// SPEC-rest.md (NetBird's API, so the dashboard, the Terraform provider and
// existing scripts work): it authenticates callers (Authorization: Bearer
// JWT or Token PAT), decodes and bounds request bodies, maps domain errors
// to status codes with JSON {message, code} bodies and converts domain
// values to the API's snake_case objects. Rules live in the domain
// packages (users, peers); this package only translates.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/wiremesh/wiremesh/internal/ratelimit"
	"github.com/wiremesh/wiremesh/management/access"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/dnsadmin"
	"github.com/wiremesh/wiremesh/management/idp"
	"github.com/wiremesh/wiremesh/management/jobs"
	"github.com/wiremesh/wiremesh/management/livefeed"
	"github.com/wiremesh/wiremesh/management/peerconns"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/releasecheck"
	"github.com/wiremesh/wiremesh/management/routing"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/users"
)

// MaxBody bounds a request body.
const MaxBody = 1 << 20

// TokenVerifier verifies JWTs.
type TokenVerifier interface {
	Verify(ctx context.Context, raw string) (auth.Claims, error)
}

// Options wire the API.
type Options struct {
	Store *store.Store
	Users *users.Service
	Peers *peers.Service
	// Access changes groups, policies, posture checks and setup keys.
	Access *access.Service
	// Routing changes routes and networks with their resources and
	// routers.
	Routing *routing.Service
	// DNS changes nameserver groups, DNS settings and custom zones.
	DNS *dnsadmin.Service
	// JWT verifies bearer tokens; nil accepts personal access tokens only.
	JWT TokenVerifier
	// IdPs administers upstream identity providers of the built-in
	// provider (nil: it is off, and /api/identity-providers answers 412).
	IdPs *idp.Providers
	// DashboardOrigins are the origins (scheme://host[:port]) whose
	// browsers may call the API cross-origin; none by default. Check them
	// with ParseOrigins.
	DashboardOrigins []string
	// Jobs runs remote debug-bundle jobs (nil: the job routes answer 404).
	Jobs *jobs.Service
	// TrustedProxies are reverse proxies whose X-Forwarded-For names the
	// client for the upload-token limit.
	TrustedProxies []netip.Prefix
	// Releases reports the latest released versions for
	// GET /api/instance/version (nil: the check is off, they are unknown).
	Releases *releasecheck.Checker
	// Conns holds our agents' connection reports (P2P, relayed), shown
	// on the peers; nil: none is shown.
	Conns *peerconns.Tracker
	// Live feeds GET /api/events/stream (nil: the route answers 404).
	Live *livefeed.Feed
	// LiveTiming tunes those streams (zero fields: the defaults).
	LiveTiming LiveTiming
	Log        *slog.Logger
}

// API is the REST handler.
type API struct {
	o     Options
	table []route
	cors  cors
	// uploadGuard limits wrong debug-bundle upload tokens per source: 10
	// at once, then one per 6 s.
	uploadGuard *ratelimit.Limiter
	// inviteGuard limits unknown invitation tokens per source on the two
	// public invitation calls: 10 at once, then one per 6 s.
	inviteGuard *ratelimit.Limiter
	// reach caches accessible_peers_count per account by network serial.
	reach *reachCache
	// peerLists caches the encoded peer list per account by serial and
	// view revision.
	peerLists *peerListCache
	// lists caches the group and policy lists the same way.
	lists *listCache
	// eventLogs caches the encoded audit events per account.
	eventLogs *eventCache
}

// New builds the API.
func New(o Options) *API {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	a := &API{o: o, cors: newCORS(o.DashboardOrigins),
		uploadGuard: ratelimit.New(ratelimit.Options{Burst: 10, Refill: 6 * time.Second, MaxKeys: 10000}),
		inviteGuard: ratelimit.New(ratelimit.Options{Burst: 10, Refill: 6 * time.Second, MaxKeys: 10000}), reach: newReachCache(), peerLists: newPeerListCache(), lists: newListCache(), eventLogs: newEventCache()}
	a.routes()
	return a
}

type handler func(w http.ResponseWriter, r *http.Request, caller account.User) error

func (a *API) routes() {
	open := func(pattern string, h func(w http.ResponseWriter, r *http.Request) error) {
		a.add(pattern, true, func(w http.ResponseWriter, r *http.Request, _ account.User) error { return h(w, r) })
	}
	authed := func(pattern string, h handler) { a.add(pattern, false, a.viewGate(pattern, h)) }
	open("GET /api/instance", a.instance)
	authed("GET /api/instance/version", a.instanceVersion)
	open("POST /api/setup", a.setup)
	open("POST /api/users/invites/{token}/accept", a.acceptInvite)

	authed("GET /api/users", a.listUsers)
	authed("POST /api/users", a.createUser)
	authed("GET /api/users/current", a.currentUser)
	authed("GET /api/users/{userId}", a.getUser)
	authed("PUT /api/users/{userId}", a.updateUser)
	authed("DELETE /api/users/{userId}", a.deleteUser)
	authed("PUT /api/users/{userId}/password", a.changePassword)
	authed("POST /api/users/{userId}/invite", a.resendInvite)
	authed("POST /api/users/{userId}/approve", a.approveUser)
	authed("DELETE /api/users/{userId}/reject", a.rejectUser)
	open("GET /api/users/invites/{inviteId}", a.inviteInfo) // the parameter is the token: one name per template
	authed("GET /api/users/{userId}/tokens", a.listTokens)
	authed("POST /api/users/{userId}/tokens", a.createToken)
	authed("GET /api/users/{userId}/tokens/{tokenId}", a.getToken)
	authed("DELETE /api/users/{userId}/tokens/{tokenId}", a.deleteToken)
	authed("GET /api/users/invites", a.listInvites)
	authed("POST /api/users/invites", a.createInvite)
	authed("DELETE /api/users/invites/{inviteId}", a.deleteInvite)
	authed("POST /api/users/invites/{inviteId}/regenerate", a.regenerateInvite)

	authed("GET /api/accounts", a.listAccounts)
	authed("PUT /api/accounts/{accountId}", a.updateAccount)
	authed("DELETE /api/accounts/{accountId}", a.deleteAccount)

	authed("GET /api/peers", a.listPeers)
	authed("GET /api/peers/{peerId}", a.getPeer)
	authed("PUT /api/peers/{peerId}", a.updatePeer)
	authed("DELETE /api/peers/{peerId}", a.deletePeer)
	authed("GET /api/peers/{peerId}/accessible-peers", a.accessiblePeers)
	authed("POST /api/peers/{peerId}/temporary-access", a.createTemporaryAccess)

	authed("GET /api/groups", a.listGroups)
	authed("POST /api/groups", a.putGroup)
	authed("GET /api/groups/{groupId}", a.getGroup)
	authed("PUT /api/groups/{groupId}", a.putGroup)
	authed("DELETE /api/groups/{groupId}", a.deleteGroup)
	authed("GET /api/policies", a.listPolicies)
	authed("POST /api/policies", a.putPolicy)
	authed("GET /api/policies/{policyId}", a.getPolicy)
	authed("PUT /api/policies/{policyId}", a.putPolicy)
	authed("DELETE /api/policies/{policyId}", a.deletePolicy)
	authed("GET /api/posture-checks", a.listPosture)
	authed("POST /api/posture-checks", a.putPosture)
	authed("GET /api/posture-checks/{postureCheckId}", a.getPosture)
	authed("PUT /api/posture-checks/{postureCheckId}", a.putPosture)
	authed("DELETE /api/posture-checks/{postureCheckId}", a.deletePosture)
	authed("GET /api/setup-keys", a.listSetupKeys)
	authed("POST /api/setup-keys", a.createSetupKey)
	authed("GET /api/setup-keys/{keyId}", a.getSetupKey)
	authed("PUT /api/setup-keys/{keyId}", a.updateSetupKey)
	authed("DELETE /api/setup-keys/{keyId}", a.deleteSetupKey)
	// Countries for the posture-check editor: no GeoIP database, so none
	// (an empty list, as the reference answers without one).
	authed("GET /api/locations/countries", func(w http.ResponseWriter, _ *http.Request, _ account.User) error { return ok(w, []any{}) })

	a.routingRoutes(authed)
	a.dnsRoutes(authed)
	a.idpRoutes(authed)
	a.jobRoutes(authed, open)

	authed("GET /api/events/audit", a.events)
	authed("GET /api/events", a.events)
	authed("GET "+EventStreamPath, a.eventStream)

	open("GET /api/openapi.json", a.openAPI)
}

var errNoRoute = errors.New("no such API endpoint")

// ServeHTTP serves /api/.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := make([]byte, 10)
	_, _ = rand.Read(id)
	w.Header().Set("X-Request-Id", hex.EncodeToString(id))
	if a.cors.handle(w, r) {
		return
	}
	// Debug bundles are larger: their upload route bounds its own body
	// (jobs.MaxBundle) once the token is checked.
	if r.URL.Path != UploadPath {
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	}
	if err := a.dispatch(w, r); err != nil {
		a.fail(w, r, err)
	}
}

// authenticate reads the Authorization header.
func (a *API) authenticate(r *http.Request) (account.User, error) {
	h := r.Header.Get("Authorization")
	scheme, cred, _ := strings.Cut(h, " ")
	cred = strings.TrimSpace(cred)
	switch {
	case h == "":
		return account.User{}, fmt.Errorf("%w: send Authorization: Token <personal access token> or Bearer <JWT>", users.ErrUnauthenticated)
	case strings.EqualFold(scheme, "Token") || (strings.EqualFold(scheme, "Bearer") && strings.HasPrefix(cred, auth.PATPrefix)):
		return a.o.Users.FromPAT(r.Context(), cred)
	case strings.EqualFold(scheme, "Bearer"):
		if a.o.JWT == nil {
			return account.User{}, fmt.Errorf("%w: no identity provider is configured; use a personal access token", users.ErrUnauthenticated)
		}
		c, err := a.o.JWT.Verify(r.Context(), cred)
		if err != nil {
			if errors.Is(err, auth.ErrIdPUnusable) {
				return account.User{}, err
			}
			return account.User{}, fmt.Errorf("%w: %w", users.ErrUnauthenticated, err)
		}
		return a.o.Users.FromClaims(r.Context(), c)
	}
	return account.User{}, fmt.Errorf("%w: unknown authorization scheme %q", users.ErrUnauthenticated, scheme)
}

// apiError is the JSON body of every error.
type apiError struct {
	Message string `json:"message"`
	Code    int    `json:"code"`
}

var errBadJSON = errors.New("couldn't parse JSON request")

type tooLarge struct{}

func (tooLarge) Error() string { return "request body too large" }

func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusInternalServerError
	msg := "internal server error"
	var mbe *http.MaxBytesError
	var nm errNoMethod
	switch {
	case errors.As(err, &mbe):
		code, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", MaxBody)
	case errors.Is(err, errBadJSON), errors.Is(err, errBadRequest):
		code, msg = http.StatusBadRequest, err.Error()
	case errors.Is(err, errNoRoute):
		code, msg = http.StatusNotFound, err.Error()
	case errors.As(err, &nm):
		w.Header().Set("Allow", strings.Join(nm.allow, ", "))
		code, msg = http.StatusMethodNotAllowed, err.Error()
	case errors.Is(err, users.ErrUnauthenticated):
		code, msg = http.StatusUnauthorized, err.Error()
	case errors.Is(err, users.ErrTooManyAttempts):
		code, msg = http.StatusTooManyRequests, err.Error()
	case errors.Is(err, users.ErrBlocked):
		code, msg = http.StatusForbidden, "user is blocked"
	case errors.Is(err, users.ErrPendingApproval):
		code, msg = http.StatusForbidden, users.ErrPendingApproval.Error()
	case errors.Is(err, users.ErrForbidden), errors.Is(err, idp.ErrForbidden):
		code, msg = http.StatusForbidden, err.Error()
	case errors.Is(err, routing.ErrInvalid):
		code, msg = http.StatusUnprocessableEntity, err.Error()
	case errors.Is(err, routing.ErrInUse):
		code, msg = http.StatusPreconditionFailed, err.Error()
	case errors.Is(err, routing.ErrConflict):
		code, msg = http.StatusConflict, err.Error()
	case errors.Is(err, routing.ErrNotFound):
		code, msg = http.StatusNotFound, "not found"
	case errors.Is(err, dnsadmin.ErrInvalid):
		code, msg = http.StatusUnprocessableEntity, err.Error()
	case errors.Is(err, dnsadmin.ErrInUse):
		code, msg = http.StatusPreconditionFailed, err.Error()
	case errors.Is(err, dnsadmin.ErrConflict):
		code, msg = http.StatusConflict, err.Error()
	case errors.Is(err, dnsadmin.ErrNotFound):
		code, msg = http.StatusNotFound, "not found"
	case errors.Is(err, access.ErrInvalid):
		code, msg = http.StatusUnprocessableEntity, err.Error()
	case errors.Is(err, access.ErrInUse):
		code, msg = http.StatusPreconditionFailed, err.Error()
	case errors.Is(err, access.ErrConflict):
		code, msg = http.StatusConflict, err.Error()
	case errors.Is(err, users.ErrNotFound), errors.Is(err, store.ErrNotFound), errors.Is(err, access.ErrNotFound):
		code, msg = http.StatusNotFound, "not found"
	case errors.Is(err, users.ErrConflict), errors.Is(err, store.ErrConflict):
		code, msg = http.StatusConflict, err.Error()
	case errors.Is(err, users.ErrSetupDone), errors.Is(err, users.ErrNoLocalIdP), errors.Is(err, users.ErrExpired), errors.Is(err, users.ErrNoInviteDelivery),
		errors.Is(err, users.ErrSoleAccount):
		code, msg = http.StatusPreconditionFailed, err.Error()
	case errors.Is(err, users.ErrMailFailed):
		code, msg = http.StatusBadGateway, err.Error()
	case errors.Is(err, peers.ErrPrecondition):
		code, msg = http.StatusPreconditionFailed, err.Error()
	case errors.Is(err, users.ErrInvalid), errors.Is(err, peers.ErrInvalid), errors.Is(err, idp.ErrInvalid):
		code, msg = http.StatusUnprocessableEntity, err.Error()
	case errors.Is(err, jobs.ErrInvalid):
		code, msg = http.StatusUnprocessableEntity, err.Error()
	case errors.Is(err, jobs.ErrBadToken):
		code, msg = http.StatusUnauthorized, err.Error()
	case errors.Is(err, jobs.ErrTooManyPending), errors.Is(err, errTooManyTokens), errors.Is(err, livefeed.ErrTooManyStreams):
		code, msg = http.StatusTooManyRequests, err.Error()
	case errors.Is(err, jobs.ErrUnsupported), errors.Is(err, jobs.ErrAccountFull):
		code, msg = http.StatusPreconditionFailed, err.Error()
	case errors.Is(err, jobs.ErrTooLarge):
		code, msg = http.StatusRequestEntityTooLarge, err.Error()
	case errors.Is(err, jobs.ErrNoBundle):
		code, msg = http.StatusNotFound, err.Error()
	case errors.Is(err, errUnsupportedMedia):
		code, msg = http.StatusUnsupportedMediaType, err.Error()
	case errors.Is(err, auth.ErrIdPUnusable), errors.Is(err, store.ErrUnavailable), errors.Is(err, livefeed.ErrClosed):
		code, msg = http.StatusServiceUnavailable, err.Error()
	default:
		a.o.Log.ErrorContext(r.Context(), "REST request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeJSON(w, code, apiError{Message: strings.ToLower(msg[:1]) + msg[1:], Code: code})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func ok(w http.ResponseWriter, v any) error {
	writeJSON(w, http.StatusOK, v)
	return nil
}

// decode reads a JSON body into v. Unknown fields are ignored, as clients
// of the reference send them.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return fmt.Errorf("%w: %w", errBadJSON, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: trailing data after the JSON object", errBadJSON)
	}
	return nil
}

// ts formats a time as the API does: RFC 3339 UTC, the zero time for unset.
func ts(t time.Time) string {
	if t.IsZero() {
		return "0001-01-01T00:00:00Z"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func requireAdmin(caller account.User) error {
	if !caller.Role.IsAdmin() {
		return fmt.Errorf("%w: this needs the admin or owner role", users.ErrForbidden)
	}
	return nil
}

// callerAccount reads the caller's account (settings included).
func (a *API) callerAccount(ctx context.Context, caller account.User) (account.Account, error) {
	var acc account.Account
	err := a.o.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		acc, err = tx.In(caller.AccountID).Account(ctx)
		return err
	})
	return acc, err
}

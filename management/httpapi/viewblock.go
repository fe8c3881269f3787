package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/users"
)

// errViewBlocked: the account blocks regular users from the API.
var errViewBlocked = fmt.Errorf("%w: the account's administrators block regular users from viewing it (regular_users_view_blocked)", users.ErrForbidden)

// viewGate wraps an authenticated route: when the account sets
// regular_users_view_blocked, a caller with role user (or billing_admin,
// a user here) reaches only its own
// user (and its tokens and password) and its own peers; everything else is
// 403. Admins and owners pass untouched.
func (a *API) viewGate(pattern string, h handler) handler {
	_, path, _ := strings.Cut(pattern, " ")
	self := strings.HasPrefix(path, "/api/users/{userId}")
	allowed := path == "/api/users/current" || path == "/api/instance/version" || path == "/api/peers" || path == EventStreamPath || strings.HasPrefix(path, "/api/peers/{peerId}")
	return func(w http.ResponseWriter, r *http.Request, caller account.User) error {
		if allowed || (self && r.PathValue("userId") == string(caller.ID)) {
			return h(w, r, caller)
		}
		blocked, err := a.viewBlocked(r.Context(), caller)
		if err != nil {
			return err
		}
		if blocked {
			return errViewBlocked
		}
		return h(w, r, caller)
	}
}

// viewBlocked reports whether the account's regular_users_view_blocked
// keeps caller from all but its own user and peers: its role is user or
// billing_admin, a service user's too (whose role would otherwise read
// everything). viewGate and the live event streams (scopeOf) both decide
// by it.
func (a *API) viewBlocked(ctx context.Context, caller account.User) (bool, error) {
	if !auth.Restricted(caller.Role) {
		return false, nil
	}
	acc, err := a.callerAccount(ctx, caller)
	if err != nil {
		return false, err
	}
	return acc.Settings.RegularUsersViewBlocked, nil
}

package httpapi

import (
	"fmt"
	"testing"

	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/users"
)

// TestLiveEndMessage: an ending stream blames the credentials only when
// they are the cause; a store or identity provider failure says so and is
// the server's (logged).
func TestLiveEndMessage(t *testing.T) {
	for _, c := range []struct {
		err    error
		msg    string
		server bool
	}{
		{users.ErrBlocked, "user is blocked", false},
		{fmt.Errorf("%w: token expired", users.ErrUnauthenticated), "the credentials are no longer valid", false},
		{users.ErrPendingApproval, "the credentials are no longer valid", false},
		{errScopeChanged, "the caller's permissions changed; reconnect to hear what they now allow", false},
		{users.ErrForbidden, "the caller's role may no longer use this stream", false},
		{fmt.Errorf("read: %w", store.ErrUnavailable), "the server could not check the credentials (store or identity provider unavailable); reconnect", true},
		{auth.ErrIdPUnusable, "the server could not check the credentials (store or identity provider unavailable); reconnect", true},
	} {
		msg, server := endMessage(c.err)
		if msg != c.msg || server != c.server {
			t.Errorf("%v: %q server=%v, want %q server=%v", c.err, msg, server, c.msg, c.server)
		}
	}
}

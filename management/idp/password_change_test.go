package idp_test

import (
	"context"
	"errors"
	"testing"

	"github.com/wiremesh/wiremesh/management/users"
)

// TestPasswordChangeEndsRefresh: a refresh token issued before a user
// changes its password is refused after the change (a stolen one ends
// with it); a wrong old password ends nothing, and other users' logins
// stay.
func TestPasswordChangeEndsRefresh(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	u, pw := r.person("dave@example.com")
	stolen := r.login(u.Email, pw)
	other := r.login(u.Email, pw)
	ownerTok := r.login("owner@example.com", "Owner-passw0rd!")

	if err := r.us.ChangePassword(ctx, u, u.ID, "not-the-password", "Dave-new-passw0rd!"); !errors.Is(err, users.ErrInvalid) {
		t.Fatalf("wrong old password: %v, want ErrInvalid", err)
	}
	access, rt := r.mustRefresh(other.RefreshToken) // a failed change ends nothing
	c, err := r.verify(access)
	if err != nil {
		t.Fatal(err)
	}

	if err := r.us.ChangePassword(ctx, u, u.ID, pw, "Dave-new-passw0rd!"); err != nil {
		t.Fatal(err)
	}
	r.refused(stolen.RefreshToken, "refresh token issued before the password change")
	r.refused(rt, "rotated refresh token issued before the password change")
	if !r.revoked(c.TokenID) {
		t.Fatal("the access token last issued from an ended login is still valid")
	}
	if n := r.refreshRows(u.ID); n != 0 {
		t.Fatalf("%d refresh tokens left after the password change", n)
	}
	r.mustRefresh(ownerTok.RefreshToken) // another user's login stays

	// A login with the new password gets a working refresh token.
	fresh := r.login(u.Email, "Dave-new-passw0rd!")
	r.mustRefresh(fresh.RefreshToken)
}

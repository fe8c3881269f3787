package users

import "errors"

// Errors callers check with errors.Is; the REST boundary maps them to
// status codes.
var (
	// ErrUnauthenticated: no valid credentials.
	ErrUnauthenticated = errors.New("authentication required")
	// ErrForbidden: the caller's role does not allow it.
	ErrForbidden = errors.New("permission denied")
	// ErrNotFound: not in the caller's account.
	ErrNotFound = errors.New("not found")
	// ErrBlocked: the user is blocked.
	ErrBlocked = errors.New("user is blocked")
	// ErrPendingApproval: the user joined an account that requires
	// approval and no admin has approved it yet.
	ErrPendingApproval = errors.New("user is pending approval: an administrator of the account must approve it first")
	// ErrInvalid: a request that breaks a rule (with details wrapped).
	ErrInvalid = errors.New("invalid request")
	// ErrConflict: it exists already.
	ErrConflict = errors.New("already exists")
	// ErrSetupDone: the first owner exists; /api/setup is closed.
	ErrSetupDone = errors.New("setup already completed")
	// ErrNoLocalIdP: the operation needs the built-in identity provider.
	ErrNoLocalIdP = errors.New("the built-in identity provider is not enabled")
	// ErrNoInviteDelivery: invitations are not sent from here.
	ErrNoInviteDelivery = errors.New("this server sends no invitations: with the built-in identity provider create an invite link " +
		"(POST /api/users/invites) and pass it on; with an external identity provider invite the user there")
	// ErrSoleAccount: the install's first account, where single-account
	// mode and the built-in identity provider put everyone, cannot be
	// deleted over the API.
	ErrSoleAccount = errors.New("this is the install's own account (where single-account mode and the built-in identity provider " +
		"put everyone): deleting it would reopen first-run setup to anyone who reaches the server; to start over, stop the " +
		"server and remove its data directory or database")
	// ErrExpired: an invite or token whose time is over.
	ErrExpired = errors.New("expired")
)

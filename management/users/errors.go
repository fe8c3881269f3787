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
	ErrNoInviteDelivery = errors.New("this server sends no invitation e-mails: configure an SMTP server (--smtp-host, --smtp-from, " +
		"--smtp-username with --smtp-password-file or NB_SMTP_PASSWORD) to send them; meanwhile create an invite link " +
		"(POST /api/users/invites) and pass it on")
	// ErrMailFailed: the invitation e-mail did not go (the SMTP server
	// could not be reached or refused it); no link of it is left valid.
	ErrMailFailed = errors.New("the invitation e-mail could not be sent")
	// ErrSoleAccount: the install's first account, where single-account
	// mode and the built-in identity provider put everyone, cannot be
	// deleted over the API.
	ErrSoleAccount = errors.New("this is the install's own account (where single-account mode and the built-in identity provider " +
		"put everyone): deleting it would reopen first-run setup to anyone who reaches the server; to start over, stop the " +
		"server and remove its data directory or database")
	// ErrTooManyPending: too many users wait for approval (upstream
	// logins are refused until an admin approves or rejects some).
	ErrTooManyPending = errors.New("too many users waiting for approval")
	// ErrExpired: an invite or token whose time is over.
	ErrExpired = errors.New("expired")
)

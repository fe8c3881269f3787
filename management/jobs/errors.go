package jobs

import "errors"

// Errors callers check with errors.Is.
var (
	// ErrInvalid: a job's parameters are out of bounds.
	ErrInvalid = errors.New("invalid job")
	// ErrUnsupported: the peer's agent cannot run jobs for this server.
	ErrUnsupported = errors.New("peer cannot run remote jobs for this server")
	// ErrTooManyPending: the peer has MaxPendingPerPeer jobs pending.
	ErrTooManyPending = errors.New("too many pending jobs")
	// ErrAccountFull: the account holds MaxBundlesPerAccount bundles.
	ErrAccountFull = errors.New("too many debug bundles stored")
	// ErrBadToken: an upload token that is unknown, used or expired.
	ErrBadToken = errors.New("unknown, used or expired upload token")
	// ErrTooLarge: an upload larger than MaxBundle.
	ErrTooLarge = errors.New("debug bundle too large")
	// ErrNoBundle: the job has no bundle (yet, or any more).
	ErrNoBundle = errors.New("job has no debug bundle")
)

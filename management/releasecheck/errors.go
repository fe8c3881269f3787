package releasecheck

import "errors"

// Sentinel errors, checked with errors.Is.
var (
	// ErrOff: no feed URL is configured.
	ErrOff = errors.New("release check is off")
	// ErrMalformed: the feed's answer is not a version feed.
	ErrMalformed = errors.New("malformed release feed")
	// ErrTooLarge: the feed's answer is larger than the cap.
	ErrTooLarge = errors.New("release feed answer too large")
	// ErrBadVersion: a string is not a semantic version.
	ErrBadVersion = errors.New("not a semantic version")
)

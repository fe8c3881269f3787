// Package routing manages what makes networks beyond the overlay
// reachable: the classic routes (a prefix or domains routed by a peer or
// the peers of groups) and networks with their resources and routers. It
// validates each change against the account (the peers, groups and overlay
// range it names, NetBird's rules on metrics, identifiers, domains and
// duplicate routes), refuses deletions that would leave something
// dangling, and commits every change in one transaction with a serial bump
// and an activity-log entry, so that running servers push new network maps.
// It does not compute what a peer receives (package networkmap does) and
// it does not read for the REST API: handlers read the store directly.
package routing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/acctchange"
	"github.com/wiremesh/wiremesh/management/store"
)

// Errors callers check with errors.Is.
var (
	// ErrInvalid: the input breaks a rule; the message names the field.
	ErrInvalid = errors.New("invalid")
	// ErrNotFound: the object (or the network in its path) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the same routing peer already routes this destination.
	ErrConflict = errors.New("already exists")
	// ErrInUse: something still names the object (a policy a resource).
	ErrInUse = errors.New("in use")
)

// Notifier learns that an account's network changed.
type Notifier interface {
	AccountChanged(id account.ID)
}

// Service changes routes and networks.
type Service struct {
	changes *acctchange.Runner
	log     *slog.Logger
	newID   func() string
}

// Options are a Service's optional dependencies.
type Options struct {
	Log *slog.Logger
	// Now and NewID default to the clock and random UUIDs; tests inject
	// them.
	Now   func() time.Time
	NewID func() string
}

// New returns a service.
func New(st *store.Store, n Notifier, o Options) *Service {
	s := &Service{changes: acctchange.New(st, n, acctchange.Options{Now: o.Now}), log: o.Log, newID: o.NewID}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.newID == nil {
		s.newID = uuid.NewString
	}
	return s
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound) && !errors.Is(err, ErrInvalid):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, store.ErrConflict) && !errors.Is(err, ErrInvalid):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return err
}

// event is an activity-log entry of a change.
type event struct {
	activity, target string
	meta             map[string]string
}

// change runs fn in one locked transaction that also bumps the serial and
// logs fn's event, then notifies. Nothing is written when fn fails.
// Writers of the same account queue on the lock, so two changes cannot
// both pass a check (a duplicate route, a unique name) the other would
// fail.
func (s *Service) change(ctx context.Context, acc account.ID, initiator string, fn func(at *store.AccountTx) (event, error)) error {
	return mapErr(s.changes.Run(ctx, acc, initiator, func(at *store.AccountTx) ([]acctchange.Event, error) {
		ev, err := fn(at)
		if err != nil {
			return nil, err
		}
		return []acctchange.Event{{Activity: ev.activity, Target: ev.target, Meta: ev.meta}}, nil
	}))
}

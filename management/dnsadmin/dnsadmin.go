// Package dnsadmin manages the account's DNS for the mesh: nameserver
// groups (split DNS to match domains, or primary upstreams), the DNS
// settings (groups whose peers get no DNS management) and custom zones
// with their A, AAAA and CNAME records. It validates each change against
// the account (its groups, overlay range and peer DNS domain, NetBird's
// rules on names, nameservers, domains and records), refuses deletions
// that would leave something dangling and commits every change in one
// locked transaction with a serial bump and NetBird's activity-log
// entries, so that running servers push new network maps.
// It does not compute what a peer receives (package networkmap does) and
// it does not read for the REST API: handlers read the store directly.
package dnsadmin

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
	// ErrNotFound: the object (or the zone in its path) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a zone with the domain, or an identical record, exists.
	ErrConflict = errors.New("already exists")
	// ErrInUse: a nameserver group, the DNS settings or a zone still
	// names the group being deleted.
	ErrInUse = errors.New("in use")
)

// Notifier learns that an account's network changed.
type Notifier interface {
	AccountChanged(id account.ID)
}

// Service changes the account's DNS.
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
	case errors.Is(err, store.ErrConflict) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrConflict):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return err
}

// event is an activity-log entry of a change.
type event struct {
	activity, target string
	meta             map[string]string
}

// change runs fn in one locked transaction that, when fn reports events,
// also bumps the serial and logs them, then notifies. Nothing is written
// when fn fails; a change without events (settings saved as they were)
// writes nothing either. Writers of the same account queue on the lock,
// so two changes cannot both pass a check (a unique name or domain, a
// CNAME conflict) the other would fail.
func (s *Service) change(ctx context.Context, acc account.ID, initiator string, fn func(at *store.AccountTx) ([]event, error)) error {
	return mapErr(s.changes.Run(ctx, acc, initiator, func(at *store.AccountTx) ([]acctchange.Event, error) {
		evs, err := fn(at)
		if err != nil {
			return nil, err
		}
		out := make([]acctchange.Event, 0, len(evs))
		for _, ev := range evs {
			out = append(out, acctchange.Event{Activity: ev.activity, Target: ev.target, Meta: ev.meta})
		}
		return out, nil
	}))
}

// refs answers, inside one transaction, what a change names: the account
// (its overlay range and peer DNS domain) and its groups, read once.
type refs struct {
	acct   account.Account
	groups map[account.GroupID]account.Group
}

func loadRefs(ctx context.Context, at *store.AccountTx) (refs, error) {
	var r refs
	var err error
	if r.acct, err = at.Account(ctx); err != nil {
		return r, err
	}
	gs, err := at.Groups(ctx)
	if err != nil {
		return r, err
	}
	r.groups = make(map[account.GroupID]account.Group, len(gs))
	for _, g := range gs {
		r.groups[g.ID] = g
	}
	return r, nil
}

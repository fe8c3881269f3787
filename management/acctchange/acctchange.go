// Package acctchange commits one change to an account's configuration the
// way every management domain service does: in a single store transaction
// it (optionally first) takes the account's write lock, runs the caller's
// change, bumps the account's network serial and appends the change's
// activity-log entries stamped with an injected clock; only after the
// commit does it tell the notifier, once. When the change fails nothing is
// written and nobody is notified.
// It does not validate anything, map store errors to a domain's own errors
// or choose event codes: the domain services (access, routing, dnsadmin)
// keep those, and call Run with a function that does the domain's work.
package acctchange

import (
	"context"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// Transactor runs fn in one store transaction, committing only when fn
// returns nil. *store.Store is one.
type Transactor interface {
	Tx(ctx context.Context, fn func(tx *store.Tx) error) error
}

// Notifier learns that an account's network changed.
type Notifier interface {
	AccountChanged(id account.ID)
}

// Event is an activity-log entry of a change.
type Event struct {
	Activity, Target string
	Meta             map[string]string
}

// Options are a Runner's optional settings.
type Options struct {
	// Now stamps the events; it defaults to time.Now. Tests inject it.
	Now func() time.Time
	// NoLock runs the change before the account's write lock is taken
	// (the serial bump then takes it). Without it, writers of the same
	// account queue before the change runs, so two changes cannot both
	// pass a check (a unique name, a duplicate route) the other would
	// fail. Package access has always run this way; it is kept a setting
	// so that this refactoring changes no behaviour.
	NoLock bool
}

// Runner commits changes. It holds no state of its own between changes
// and is safe for concurrent use.
type Runner struct {
	st     Transactor
	notify Notifier
	now    func() time.Time
	lock   bool
}

// New returns a runner committing to st and telling n of every change.
func New(st Transactor, n Notifier, o Options) *Runner {
	r := &Runner{st: st, notify: n, now: o.Now, lock: !o.NoLock}
	if r.now == nil {
		r.now = time.Now
	}
	return r
}

// Run runs fn in one transaction confined to account acc. When fn returns
// events, the same transaction bumps the serial and logs them (in order,
// attributed to initiator), and acc's change is notified once after the
// commit. When fn returns no events (something saved as it was) its
// transaction commits without a serial bump or log entry and nobody is
// notified. When fn or any step fails the transaction is rolled back,
// nobody is notified, and the error is returned as it came so that the
// caller maps it to its own errors (and its messages stay the same).
func (r *Runner) Run(ctx context.Context, acc account.ID, initiator string, fn func(at *store.AccountTx) ([]Event, error)) error {
	changed := false
	err := r.st.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		if r.lock {
			if _, err := at.Lock(ctx); err != nil {
				return err
			}
		}
		evs, err := fn(at)
		if err != nil || len(evs) == 0 {
			return err
		}
		if _, err := at.BumpSerial(ctx); err != nil {
			return err
		}
		for _, ev := range evs {
			e := account.Event{At: r.now().UTC(), Activity: ev.Activity, Initiator: initiator, Target: ev.Target, Meta: ev.Meta}
			if _, err := at.InsertEvent(ctx, e); err != nil {
				return err
			}
		}
		changed = true
		return nil
	})
	if err != nil {
		return err
	}
	if changed {
		r.notify.AccountChanged(acc)
	}
	return nil
}

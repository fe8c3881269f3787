package peers

import (
	"context"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// sweep is one kind of peer expiry (login, inactivity) for expire.
type sweep struct {
	// duration is an account's expiration of this kind; 0 when off.
	duration func(account.Settings) time.Duration
	// between lists the candidate peers whose deadline reference lies in
	// (after, before] (unix nanoseconds).
	between func(ctx context.Context, tx *store.Tx, after, before int64) ([]account.Peer, error)
	// expired confirms a candidate under its account's settings.
	expired func(set account.Settings, p account.Peer, now time.Time) bool
	mark    func(account.Peer) time.Time // what seen keeps for a peer
	reason  string                       // meta "reason" of the events; none if empty
	log     string
}

// expire announces the peers that expired under sw after since (and up
// to now). It reads the accounts and, per expiration in use (accounts
// share few values), one narrow window of candidates; seen remembers
// what was announced, against repeats at the windows' edges. Per account
// with fresh peers it bumps the serial and records a peer.login.expire
// event per peer in one transaction, then notifies the account's streams.
func (s *Service) expire(ctx context.Context, since time.Time, seen map[account.PeerID]time.Time, sw sweep) error {
	now := s.now()
	var accs []account.Account
	if err := s.store.Read(ctx, func(tx *store.Tx) error {
		var err error
		accs, err = tx.Accounts(ctx)
		return err
	}); err != nil {
		return err
	}
	settings := map[account.ID]account.Settings{}
	durations := map[time.Duration]bool{}
	for _, a := range accs {
		if d := sw.duration(a.Settings); d > 0 {
			settings[a.ID], durations[d] = a.Settings, true
		}
	}
	oldest := now
	fresh := map[account.ID][]account.Peer{}
	for d := range durations {
		after, before := since.Add(-d-time.Second), now.Add(-d)
		if after.Before(oldest) {
			oldest = after
		}
		var ps []account.Peer
		if err := s.store.Read(ctx, func(tx *store.Tx) error {
			var err error
			ps, err = sw.between(ctx, tx, after.UnixNano(), before.UnixNano())
			return err
		}); err != nil {
			return err
		}
		for _, p := range ps {
			set, ok := settings[p.AccountID]
			if !ok || sw.duration(set) != d || !sw.expired(set, p, now) {
				continue
			}
			if last, ok := seen[p.ID]; ok && last.Equal(sw.mark(p)) {
				continue
			}
			fresh[p.AccountID] = append(fresh[p.AccountID], p)
		}
	}
	for id, last := range seen {
		if last.Before(oldest) {
			delete(seen, id)
		}
	}
	for acc, ps := range fresh {
		err := s.store.Tx(ctx, func(tx *store.Tx) error {
			at := tx.In(acc)
			if _, err := at.BumpSerial(ctx); err != nil {
				return err
			}
			for _, p := range ps {
				meta := map[string]string{"name": p.Name, "user": string(p.UserID)}
				if sw.reason != "" {
					meta["reason"] = sw.reason
				}
				if _, err := at.InsertEvent(ctx, account.Event{At: now, Activity: "peer.login.expire", Initiator: "system", Target: string(p.ID), Meta: meta}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, p := range ps {
			seen[p.ID] = sw.mark(p)
			s.log.Info(sw.log, "peer", p.ID, "name", p.Name, "user", p.UserID)
		}
		s.notify.AccountChanged(acc)
		if s.States != nil {
			for _, p := range ps {
				s.States.PeerChanged(acc, p.ID, p.UserID) // its owner sees it expire
			}
		}
	}
	return nil
}

package peers

import (
	"context"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// ExpireInactive announces the peers added by users that stayed
// disconnected longer than their account's inactivity expiration, the
// deadline falling after since (and up to now): it bumps the serial of
// their accounts, so every map drops them; they must log in again (SSO)
// to come back. seen remembers what was announced (the last contact of
// each peer), against repeats; the caller keeps it between calls.
func (s *Service) ExpireInactive(ctx context.Context, since time.Time, seen map[account.PeerID]time.Time) error {
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
		if !a.Settings.PeerInactivityExpirationEnabled || a.Settings.PeerInactivityExpiration <= 0 {
			continue
		}
		settings[a.ID] = a.Settings
		durations[time.Duration(a.Settings.PeerInactivityExpiration)*time.Second] = true
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
			ps, err = tx.InactiveBetween(ctx, after.UnixNano(), before.UnixNano())
			return err
		}); err != nil {
			return err
		}
		for _, p := range ps {
			set, ok := settings[p.AccountID]
			if !ok || time.Duration(set.PeerInactivityExpiration)*time.Second != d || !set.Expired(p, now) {
				continue
			}
			if last, ok := seen[p.ID]; ok && last.Equal(lastContact(p)) {
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
				if _, err := at.InsertEvent(ctx, account.Event{At: now, Activity: "peer.login.expire", Initiator: "system", Target: string(p.ID),
					Meta: map[string]string{"name": p.Name, "user": string(p.UserID), "reason": "inactivity"}}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, p := range ps {
			seen[p.ID] = lastContact(p)
			s.log.Info("peer inactive too long, login required", "peer", p.ID, "name", p.Name, "user", p.UserID)
		}
		s.notify.AccountChanged(acc)
	}
	return nil
}

// lastContact is when a peer was last connected or logged in.
func lastContact(p account.Peer) time.Time {
	if p.LastLogin.After(p.LastSeen) {
		return p.LastLogin
	}
	return p.LastSeen
}

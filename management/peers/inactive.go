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
	return s.expire(ctx, since, seen, sweep{
		duration: func(set account.Settings) time.Duration {
			if !set.PeerInactivityExpirationEnabled {
				return 0
			}
			return time.Duration(set.PeerInactivityExpiration) * time.Second
		},
		between: func(ctx context.Context, tx *store.Tx, after, before int64) ([]account.Peer, error) {
			return tx.InactiveBetween(ctx, after, before)
		},
		expired: account.Settings.Expired,
		mark:    lastContact,
		reason:  "inactivity",
		log:     "peer inactive too long, login required",
	})
}

// lastContact is when a peer was last connected or logged in.
func lastContact(p account.Peer) time.Time {
	if p.LastLogin.After(p.LastSeen) {
		return p.LastLogin
	}
	return p.LastSeen
}

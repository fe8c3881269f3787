package networkmap

import (
	"time"

	"github.com/wiremesh/wiremesh/management/account"
)

// Participants keeps the peers that take part in the account's network
// at now: not those of blocked users, not those whose login or
// inactivity expired. Maps are computed over them.
func Participants(a account.Account, ps []account.Peer, blocked map[account.UserID]bool, now time.Time) []account.Peer {
	out := ps[:0:0]
	for _, p := range ps {
		if p.UserID != "" && blocked[p.UserID] {
			continue
		}
		if a.Settings.Expired(p, now) {
			continue
		}
		out = append(out, p)
	}
	return out
}

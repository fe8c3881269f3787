package store

import (
	"context"
	"net/netip"

	"github.com/wiremesh/wiremesh/management/account"
)

// PeerByIP finds the account's peer holding the overlay address ip (an
// indexed lookup, as IPTaken's); ErrNotFound when none does.
func (a *AccountTx) PeerByIP(ctx context.Context, ip netip.Addr) (account.Peer, error) {
	return scanPeer(a.q().queryRow(ctx, `SELECT `+peerCols+` FROM peers WHERE account_id = ? AND ip = ?`, string(a.id), ip.Unmap().String()))
}

package grpcapi

import (
	"context"
	"fmt"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/management/store"
)

// selfV6 reports whether a peer that just logged in is v6-active, by the
// rule its maps use (networkmap.V6Active), so that the address_v6 of the
// LoginResponse is the one every Sync repeats. Only a peer holding a v6
// address costs a read (of the account's groups).
func (s *Server) selfV6(ctx context.Context, acc account.Account, p account.Peer) (bool, error) {
	if !p.IPv6.IsValid() || !p.SupportsIPv6() || !acc.NetworkV6.IsValid() {
		return false, nil
	}
	var groups []account.Group
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		groups, err = tx.In(acc.ID).Groups(ctx)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("read groups for the IPv6 overlay: %w", err)
	}
	return networkmap.V6Active(acc, groups, p), nil
}

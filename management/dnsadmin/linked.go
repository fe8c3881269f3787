package dnsadmin

import (
	"context"
	"fmt"
	"slices"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// GroupLinked reports the first nameserver group, DNS setting or zone
// that names group id, as an error wrapping ErrInUse with NetBird's
// message ("group has been linked to name server groups: corp"); nil when
// none does. The access service calls it before deleting a group, in its
// own transaction.
func GroupLinked(ctx context.Context, at *store.AccountTx, id account.GroupID) error {
	gs, err := at.NameserverGroups(ctx)
	if err != nil {
		return err
	}
	for _, g := range gs {
		if slices.Contains(g.Groups, id) {
			return fmt.Errorf("%w: group has been linked to name server groups: %s", ErrInUse, g.Name)
		}
	}
	set, err := at.DNSSettings(ctx)
	if err != nil {
		return err
	}
	if slices.Contains(set.DisabledManagementGroups, id) {
		name := string(id)
		if g, err := at.Group(ctx, id); err == nil {
			name = g.Name
		}
		return fmt.Errorf("%w: group has been linked to disabled DNS management groups: %s", ErrInUse, name)
	}
	zs, err := at.Zones(ctx)
	if err != nil {
		return err
	}
	for _, z := range zs {
		if slices.Contains(z.DistributionGroups, id) {
			return fmt.Errorf("%w: group has been linked to DNS zone: %s", ErrInUse, z.Name)
		}
	}
	return nil
}

package dnsadmin

import (
	"context"
	"slices"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// PutNameserverGroup creates (g.ID empty) or replaces a nameserver group
// after validating it against the account. It returns the group as
// stored.
func (s *Service) PutNameserverGroup(ctx context.Context, acc account.ID, g account.NameserverGroup, initiator string) (account.NameserverGroup, error) {
	activity := "nameserver.group.update"
	if g.ID == "" {
		g.ID, activity = account.NameserverGroupID(s.newID()), "nameserver.group.add"
	}
	g.AccountID = acc
	err := s.change(ctx, acc, initiator, func(at *store.AccountTx) ([]event, error) {
		if activity == "nameserver.group.update" {
			if _, err := at.NameserverGroup(ctx, g.ID); err != nil {
				return nil, err
			}
		}
		rf, err := loadRefs(ctx, at)
		if err != nil {
			return nil, err
		}
		others, err := at.NameserverGroups(ctx)
		if err != nil {
			return nil, err
		}
		if activity == "nameserver.group.add" {
			if err := full("nameserver groups", len(others), MaxNameserverGroups); err != nil {
				return nil, err
			}
		}
		if err := rf.checkNameserverGroup(&g, others); err != nil {
			return nil, err
		}
		if err := at.PutNameserverGroup(ctx, g); err != nil {
			return nil, err
		}
		return []event{{activity, string(g.ID), map[string]string{"name": g.Name}}}, nil
	})
	return g, err
}

// DeleteNameserverGroup removes a nameserver group.
func (s *Service) DeleteNameserverGroup(ctx context.Context, acc account.ID, id account.NameserverGroupID, initiator string) error {
	return s.change(ctx, acc, initiator, func(at *store.AccountTx) ([]event, error) {
		g, err := at.NameserverGroup(ctx, id)
		if err != nil {
			return nil, err
		}
		if err := at.DeleteNameserverGroup(ctx, id); err != nil {
			return nil, err
		}
		return []event{{"nameserver.group.delete", string(id), map[string]string{"name": g.Name}}}, nil
	})
}

// PutSettings replaces the account's DNS settings. Each group added to or
// removed from the disabled-management list is logged on its own, as
// NetBird does; saving the settings unchanged changes nothing.
func (s *Service) PutSettings(ctx context.Context, acc account.ID, set account.DNSSettings, initiator string) (account.DNSSettings, error) {
	err := s.change(ctx, acc, initiator, func(at *store.AccountTx) ([]event, error) {
		rf, err := loadRefs(ctx, at)
		if err != nil {
			return nil, err
		}
		if set.DisabledManagementGroups, err = rf.groupList("disabled_management_groups", set.DisabledManagementGroups, false); err != nil {
			return nil, err
		}
		old, err := at.DNSSettings(ctx)
		if err != nil {
			return nil, err
		}
		var evs []event
		groupEvent := func(code string, id account.GroupID) {
			evs = append(evs, event{code, string(acc), map[string]string{"group": rf.groups[id].Name, "group_id": string(id)}})
		}
		for _, id := range set.DisabledManagementGroups {
			if !slices.Contains(old.DisabledManagementGroups, id) {
				groupEvent("dns.setting.disabled.management.group.add", id)
			}
		}
		for _, id := range old.DisabledManagementGroups {
			if !slices.Contains(set.DisabledManagementGroups, id) {
				groupEvent("dns.setting.disabled.management.group.delete", id)
			}
		}
		if len(evs) == 0 {
			return nil, nil
		}
		return evs, at.PutDNSSettings(ctx, set)
	})
	return set, err
}

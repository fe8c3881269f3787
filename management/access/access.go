// Package access manages what decides who may reach whom in an account:
// groups, policies, posture checks, and the setup keys that place new
// peers in groups. It validates them (the built-in All group is immutable,
// rules name existing groups, ports fit their protocol, checks can be
// evaluated), refuses to delete what something still uses, and commits
// every change with a serial bump and an activity-log entry so that
// running servers push new maps to the affected peers. The map
// computation itself lives in package networkmap.
package access

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/acctchange"
	"github.com/wiremesh/wiremesh/management/dnsadmin"
	"github.com/wiremesh/wiremesh/management/routing"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/v6addr"
)

// Errors callers check with errors.Is.
var (
	ErrInvalid  = errors.New("invalid")
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("already exists")
	// ErrInUse: the group is still named by a policy, setup key or user.
	ErrInUse = errors.New("in use")
)

// Notifier learns that an account's network changed.
type Notifier interface {
	AccountChanged(id account.ID)
}

// Service changes groups and policies.
type Service struct {
	st      *store.Store
	changes *acctchange.Runner
	log     *slog.Logger
	now     func() time.Time
}

// New returns a service.
func New(st *store.Store, n Notifier, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := time.Now
	// NoLock: this service's changes have always run before the account
	// lock is taken (the serial bump takes it); kept as it was.
	return &Service{st: st, changes: acctchange.New(st, n, acctchange.Options{Now: now, NoLock: true}), log: log, now: now}
}

func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound) && !errors.Is(err, ErrInvalid):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return err
}

// change runs fn, bumps the serial and logs the change in one
// transaction, then notifies. Nothing is written when fn fails.
func (s *Service) change(ctx context.Context, acc account.ID, activity, target, initiator string, meta map[string]string, fn func(at *store.AccountTx) error) error {
	return mapErr(s.changes.Run(ctx, acc, initiator, func(at *store.AccountTx) ([]acctchange.Event, error) {
		if err := fn(at); err != nil {
			return nil, err
		}
		return []acctchange.Event{{Activity: activity, Target: target, Meta: meta}}, nil
	}))
}

// --- groups ---

func cleanName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 255 {
		return "", fmt.Errorf("%w: a name must have 1 to 255 characters", ErrInvalid)
	}
	return name, nil
}

// checkPeers refuses peer IDs that are not the account's and drops repeats.
func checkPeers(ctx context.Context, at *store.AccountTx, ids []account.PeerID) ([]account.PeerID, error) {
	out := []account.PeerID{}
	for _, id := range ids {
		if slices.Contains(out, id) {
			continue
		}
		if _, err := at.Peer(ctx, id); errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("%w: peer %q does not exist", ErrInvalid, id)
		} else if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, nil
}

// PutGroup creates (id empty) or replaces a group with its full member list.
func (s *Service) PutGroup(ctx context.Context, acc account.ID, id account.GroupID, name string, peers []account.PeerID, initiator string) (account.Group, error) {
	return s.putGroup(ctx, acc, id, name, peers, nil, initiator)
}

// PutGroupResources is PutGroup that also sets which network resources
// the group holds (the API's group "resources"): exactly those listed, in
// the same transaction. A resource's groups are stored on the resource,
// so those that join or leave the group are rewritten.
func (s *Service) PutGroupResources(ctx context.Context, acc account.ID, id account.GroupID, name string, peers []account.PeerID,
	resources []account.NetworkResourceID, initiator string) (account.Group, error) {
	if resources == nil {
		resources = []account.NetworkResourceID{}
	}
	return s.putGroup(ctx, acc, id, name, peers, resources, initiator)
}

// placeResources makes the group hold exactly the listed resources.
func placeResources(ctx context.Context, at *store.AccountTx, id account.GroupID, want []account.NetworkResourceID) error {
	rs, err := at.NetworkResources(ctx)
	if err != nil {
		return err
	}
	known := make(map[account.NetworkResourceID]bool, len(rs))
	for _, r := range rs {
		known[r.ID] = true
	}
	for _, w := range want {
		if !known[w] {
			return fmt.Errorf("%w: resources: network resource %q does not exist", ErrInvalid, w)
		}
	}
	for _, r := range rs {
		in, has := slices.Contains(want, r.ID), slices.Contains(r.Groups, id)
		if in == has {
			continue
		}
		if in {
			r.Groups = append(r.Groups, id)
		} else {
			r.Groups = slices.DeleteFunc(r.Groups, func(g account.GroupID) bool { return g == id })
		}
		if err := at.PutNetworkResource(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// putGroup writes a group; resources, when not nil, are the network
// resources it holds.
func (s *Service) putGroup(ctx context.Context, acc account.ID, id account.GroupID, name string, peers []account.PeerID,
	resources []account.NetworkResourceID, initiator string) (account.Group, error) {
	name, err := cleanName(name)
	if err != nil {
		return account.Group{}, err
	}
	activity := "group.update"
	if id == "" {
		id, activity = account.GroupID(uuid.NewString()), "group.add"
	}
	g := account.Group{ID: id, AccountID: acc, Name: name}
	err = s.change(ctx, acc, activity, string(id), initiator, map[string]string{"name": name}, func(at *store.AccountTx) error {
		if activity == "group.update" {
			old, err := at.Group(ctx, id)
			if err != nil {
				return err
			}
			if old.All {
				return fmt.Errorf("%w: the All group cannot be changed", ErrInvalid)
			}
		}
		if name == "All" {
			return fmt.Errorf("%w: All is the built-in group's name", ErrInvalid)
		}
		var err error
		if g.Peers, err = checkPeers(ctx, at, peers); err != nil {
			return err
		}
		if err := at.PutGroup(ctx, g); errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("%w: a group named %q", ErrConflict, name)
		} else if err != nil {
			return err
		}
		// Peers that joined or left an IPv6-enabled group gain or lose
		// their IPv6 overlay address.
		if _, err := v6addr.GroupsChanged(ctx, at, id); errors.Is(err, v6addr.ErrNetworkTooSmall) {
			return fmt.Errorf("%w: peers: %w", ErrInvalid, err)
		} else if err != nil {
			return err
		}
		if resources != nil {
			return placeResources(ctx, at, id, resources)
		}
		return nil
	})
	return g, err
}

// DeleteGroup removes a group nothing refers to.
func (s *Service) DeleteGroup(ctx context.Context, acc account.ID, id account.GroupID, initiator string) error {
	return s.change(ctx, acc, "group.delete", string(id), initiator, nil, func(at *store.AccountTx) error {
		g, err := at.Group(ctx, id)
		if err != nil {
			return err
		}
		if g.All {
			return fmt.Errorf("%w: the All group cannot be deleted", ErrInvalid)
		}
		if err := linked(ctx, at, id); err != nil {
			return err
		}
		return at.DeleteGroup(ctx, id)
	})
}

// linked reports what still names a group. It takes the account lock
// before reading the settings: a settings change naming the group in
// ipv6_enabled_groups (which checks that the group exists, under the
// lock) then either committed before, and the group is refused here, or
// runs after the delete and fails on the missing group.
func linked(ctx context.Context, at *store.AccountTx, id account.GroupID) error {
	acc, err := at.Lock(ctx)
	if err != nil {
		return err
	}
	if slices.Contains(acc.Settings.IPv6EnabledGroups, id) {
		return fmt.Errorf("%w: group has been linked to the account settings: ipv6_enabled_groups", ErrInUse)
	}
	ps, err := at.Policies(ctx)
	if err != nil {
		return err
	}
	for _, p := range ps {
		for _, r := range p.Rules {
			if slices.Contains(r.Sources, id) || slices.Contains(r.Destinations, id) {
				return fmt.Errorf("%w: group has been linked to policy: %s", ErrInUse, p.Name)
			}
		}
	}
	ks, err := at.SetupKeys(ctx)
	if err != nil {
		return err
	}
	for _, k := range ks {
		if slices.Contains(k.AutoGroups, string(id)) {
			return fmt.Errorf("%w: group has been linked to setup key: %s", ErrInUse, k.Name)
		}
	}
	us, err := at.Users(ctx)
	if err != nil {
		return err
	}
	for _, u := range us {
		if slices.Contains(u.AutoGroups, string(id)) {
			return fmt.Errorf("%w: group has been linked to user: %s", ErrInUse, u.Name)
		}
	}
	// Routes, network resources and routers (routing.ErrInUse).
	if err := routing.GroupLinked(ctx, at, id); err != nil {
		return err
	}
	// Nameserver groups, DNS settings and zones (dnsadmin.ErrInUse).
	return dnsadmin.GroupLinked(ctx, at, id)
}

// --- policies ---

var protocols = []string{account.ProtoAll, account.ProtoTCP, account.ProtoUDP, account.ProtoICMP}

// PolicyRefs answers whether the objects a policy names exist. The
// domain service asks its store transaction; the admin CLI's import asks
// the dump it is about to write, so both apply the same rules.
type PolicyRefs interface {
	PeerExists(ctx context.Context, id account.PeerID) (bool, error)
	GroupExists(ctx context.Context, id account.GroupID) (bool, error)
	PostureCheckExists(ctx context.Context, id account.PostureCheckID) (bool, error)
	ResourceExists(ctx context.Context, id account.NetworkResourceID) (bool, error)
}

// txRefs is PolicyRefs over an account transaction.
type txRefs struct{ at *store.AccountTx }

func exists(err error) (bool, error) {
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (r txRefs) PeerExists(ctx context.Context, id account.PeerID) (bool, error) {
	_, err := r.at.Peer(ctx, id)
	return exists(err)
}

func (r txRefs) GroupExists(ctx context.Context, id account.GroupID) (bool, error) {
	_, err := r.at.Group(ctx, id)
	return exists(err)
}

func (r txRefs) PostureCheckExists(ctx context.Context, id account.PostureCheckID) (bool, error) {
	_, err := r.at.PostureCheck(ctx, id)
	return exists(err)
}

func (r txRefs) ResourceExists(ctx context.Context, id account.NetworkResourceID) (bool, error) {
	_, err := r.at.NetworkResource(ctx, id)
	return exists(err)
}

// validate checks a policy against the account's groups.
func validate(ctx context.Context, at *store.AccountTx, p *account.Policy) error {
	return ValidatePolicy(ctx, txRefs{at}, p)
}

// ValidatePolicy checks a policy and the objects it names, filling in
// rule IDs and names left empty. Errors wrap ErrInvalid.
func ValidatePolicy(ctx context.Context, refs PolicyRefs, p *account.Policy) error {
	var err error
	if p.Name, err = cleanName(p.Name); err != nil {
		return err
	}
	if len(p.Rules) == 0 {
		return fmt.Errorf("%w: a policy needs at least one rule", ErrInvalid)
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		if r.ID == "" {
			r.ID = uuid.NewString()
		}
		if strings.TrimSpace(r.Name) == "" {
			r.Name = p.Name
		}
		if r.Action != account.ActionAccept && r.Action != account.ActionDrop {
			return fmt.Errorf("%w: rule action %q (want accept or drop)", ErrInvalid, r.Action)
		}
		if !slices.Contains(protocols, r.Protocol) {
			return fmt.Errorf("%w: rule protocol %q (want all, tcp, udp or icmp)", ErrInvalid, r.Protocol)
		}
		if len(r.Ports) > 0 && len(r.PortRanges) > 0 {
			return fmt.Errorf("%w: ports and port_ranges cannot be combined", ErrInvalid)
		}
		if (len(r.Ports) > 0 || len(r.PortRanges) > 0) && r.Protocol != account.ProtoTCP && r.Protocol != account.ProtoUDP {
			return fmt.Errorf("%w: ports need protocol tcp or udp", ErrInvalid)
		}
		for _, pr := range r.PortRanges {
			if pr.Start == 0 || pr.End < pr.Start {
				return fmt.Errorf("%w: port range %d-%d", ErrInvalid, pr.Start, pr.End)
			}
		}
		if r.DestinationPeer != "" && r.DestinationResource != "" {
			return fmt.Errorf("%w: a rule's destination is one peer or one network resource, not both", ErrInvalid)
		}
		if (len(r.Sources) == 0) == (r.SourcePeer == "") || (len(r.Destinations) == 0) == (r.DestinationPeer == "" && r.DestinationResource == "") {
			return fmt.Errorf("%w: each side of a rule needs either groups or a single resource", ErrInvalid)
		}
		if r.DestinationResource != "" {
			if ok, err := refs.ResourceExists(ctx, r.DestinationResource); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("%w: network resource %q does not exist", ErrInvalid, r.DestinationResource)
			}
		}
		for _, id := range []account.PeerID{r.SourcePeer, r.DestinationPeer} {
			if id == "" {
				continue
			}
			if ok, err := refs.PeerExists(ctx, id); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("%w: peer %q does not exist", ErrInvalid, id)
			}
		}
		for _, g := range append(slices.Clone(r.Sources), r.Destinations...) {
			if ok, err := refs.GroupExists(ctx, g); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("%w: group %q does not exist", ErrInvalid, g)
			}
		}
	}
	for _, c := range p.PostureChecks {
		if ok, err := refs.PostureCheckExists(ctx, account.PostureCheckID(c)); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("%w: posture check %q does not exist", ErrInvalid, c)
		}
	}
	return nil
}

// PutPolicy creates (p.ID empty) or replaces a policy.
func (s *Service) PutPolicy(ctx context.Context, acc account.ID, p account.Policy, initiator string) (account.Policy, error) {
	activity := "policy.update"
	if p.ID == "" {
		p.ID, activity = account.PolicyID(uuid.NewString()), "policy.add"
	}
	p.AccountID = acc
	err := s.change(ctx, acc, activity, string(p.ID), initiator, map[string]string{"name": p.Name}, func(at *store.AccountTx) error {
		if activity == "policy.update" {
			if _, err := at.Policy(ctx, p.ID); err != nil {
				return err
			}
		}
		if err := validate(ctx, at, &p); err != nil {
			return err
		}
		return at.PutPolicy(ctx, p)
	})
	return p, err
}

// DeletePolicy removes a policy.
func (s *Service) DeletePolicy(ctx context.Context, acc account.ID, id account.PolicyID, initiator string) error {
	return s.change(ctx, acc, "policy.delete", string(id), initiator, nil, func(at *store.AccountTx) error {
		return at.DeletePolicy(ctx, id)
	})
}

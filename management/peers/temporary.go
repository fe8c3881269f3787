package peers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/dnsname"
	"github.com/wiremesh/wiremesh/management/store"
)

// Temporary peers are what the dashboard's in-browser SSH/RDP client runs
// as (POST /api/peers/{peerId}/temporary-access): an admin creates one
// with the browser's WireGuard key, together with one policy per rule
// letting it reach the target peer (one direction, on the rule's ports).
// It logs in over gRPC with its key alone, belongs to no group (not even
// All), and is removed with its policies when its Sync stream ends. One
// that never connects, or whose removal was missed (its management
// instance died), goes once it has been offline TemporaryOffline.

// TemporaryOffline is how long a temporary peer may stay offline, or
// never connect, before it and its policies are removed: 10 minutes, as
// the reference's ephemeral peers.
const TemporaryOffline = 10 * time.Minute

// MaxTemporaryRules bounds the rules of one temporary access request.
const MaxTemporaryRules = 16

// Initiators recorded in the activity log for removals nobody asked for.
const (
	initiatorDisconnect = "temporary-peer-disconnect"
	initiatorExpiry     = "temporary-peer-expiry"
)

// TemporaryInput is a temporary access request.
type TemporaryInput struct {
	Name  string
	Key   string // WireGuard public key, base64
	Rules []string
}

// ParseTemporaryRule reads one access rule: "all", "icmp", or
// "tcp|udp/port" or "tcp|udp/first-last".
func ParseTemporaryRule(s string) (account.Rule, error) {
	r := account.Rule{Enabled: true, Action: account.ActionAccept}
	v := strings.ToLower(strings.TrimSpace(s))
	switch v {
	case account.ProtoAll, account.ProtoICMP:
		r.Protocol = v
		return r, nil
	}
	proto, ports, ok := strings.Cut(v, "/")
	switch {
	case !ok:
		return r, fmt.Errorf("%w: rules: %q: want protocol/port, protocol/first-last, all or icmp", ErrInvalid, s)
	case proto == "netbird-ssh":
		return r, fmt.Errorf("%w: rules: %q: netbird-ssh rules are not supported by this server; use tcp/22", ErrInvalid, s)
	case proto == account.ProtoICMP:
		return r, fmt.Errorf("%w: rules: %q: icmp takes no port", ErrInvalid, s)
	case proto != account.ProtoTCP && proto != account.ProtoUDP:
		return r, fmt.Errorf("%w: rules: %q: protocol must be tcp or udp", ErrInvalid, s)
	}
	r.Protocol = proto
	first, last, isRange := strings.Cut(ports, "-")
	lo, err := parsePort(first)
	if err != nil {
		return r, fmt.Errorf("%w: rules: %q: %w", ErrInvalid, s, err)
	}
	if !isRange {
		r.Ports = []uint16{lo}
		return r, nil
	}
	hi, err := parsePort(last)
	if err != nil {
		return r, fmt.Errorf("%w: rules: %q: %w", ErrInvalid, s, err)
	}
	if hi < lo {
		return r, fmt.Errorf("%w: rules: %q: the range ends before it starts", ErrInvalid, s)
	}
	r.PortRanges = []account.PortRange{{Start: lo, End: hi}}
	return r, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q is not 1 to 65535", s)
	}
	return uint16(n), nil
}

// checkTemporary validates a request; it returns the cleaned name, the key
// and the parsed rules.
func checkTemporary(in TemporaryInput) (string, key.Public, []account.Rule, error) {
	name := strings.TrimSpace(in.Name)
	if name == "" || len(name) > dnsname.MaxLabel || !strings.ContainsFunc(name, func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
	}) {
		return "", key.Public{}, nil, fmt.Errorf("%w: name: 1 to %d characters with at least one letter or digit (it becomes the DNS label)", ErrInvalid, dnsname.MaxLabel)
	}
	k, err := key.ParsePublic(strings.TrimSpace(in.Key))
	if err != nil || k.IsZero() {
		return "", key.Public{}, nil, fmt.Errorf("%w: wg_pub_key: not a WireGuard public key (32 bytes, base64)", ErrInvalid)
	}
	if len(in.Rules) == 0 || len(in.Rules) > MaxTemporaryRules {
		return "", key.Public{}, nil, fmt.Errorf("%w: rules: 1 to %d rules", ErrInvalid, MaxTemporaryRules)
	}
	rules := make([]account.Rule, 0, len(in.Rules))
	for _, s := range in.Rules {
		r, err := ParseTemporaryRule(s)
		if err != nil {
			return "", key.Public{}, nil, err
		}
		rules = append(rules, r)
	}
	return name, k, rules, nil
}

// CreateTemporary adds a temporary peer that may reach only target, on
// in.Rules, and one policy per rule, in one transaction. The peer is
// approved (an admin made it); initiator is recorded as its creator.
func (s *Service) CreateTemporary(ctx context.Context, acc account.ID, target account.PeerID, in TemporaryInput, initiator account.UserID) (account.Peer, error) {
	name, k, rules, err := checkTemporary(in)
	if err != nil {
		return account.Peer{}, err
	}
	var p account.Peer
	for attempt := 0; ; attempt++ {
		p, err = s.createTemporary(ctx, acc, target, name, k, rules, initiator)
		if errors.Is(err, store.ErrConflict) && !errors.Is(err, errKeyTaken) && attempt < 5 {
			continue // an address or label taken meanwhile
		}
		break
	}
	if err != nil {
		return account.Peer{}, fmt.Errorf("temporary access to %s: %w", target, err)
	}
	s.notify.AccountChanged(acc)
	if s.States != nil {
		s.States.MembershipChanged(acc) // with its policies
	}
	return p, nil
}

var errKeyTaken = fmt.Errorf("%w: wg_pub_key: a peer with this WireGuard key already exists", store.ErrConflict)

func (s *Service) createTemporary(ctx context.Context, acc account.ID, target account.PeerID, name string, k key.Public, rules []account.Rule, initiator account.UserID) (account.Peer, error) {
	now := s.now().UTC()
	var p account.Peer
	err := s.store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		a, err := at.Lock(ctx)
		if err != nil {
			return err
		}
		dst, err := at.Peer(ctx, target)
		if err != nil {
			return err
		}
		if dst.Temporary {
			return fmt.Errorf("%w: the target is a temporary peer", ErrInvalid)
		}
		if _, err := tx.PeerByKey(ctx, k); err == nil {
			return errKeyTaken
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		// No user owns it (the activity log names its creator): it must
		// not go with a user's peers, which would leave its policies
		// behind, nor be subject to login expiry.
		p = account.Peer{ID: account.PeerID(uuid.NewString()), AccountID: acc, Key: k, Name: name,
			Meta:      account.Meta{Hostname: name, GoOS: "js", OS: "js", KernelVersion: "wasm"},
			Ephemeral: true, Temporary: true, CreatedAt: now, LastLogin: now, LastSeen: now}
		if err := s.insert(ctx, tx, at, a, &p, nil); err != nil {
			return err
		}
		if _, err := at.InsertEvent(ctx, account.Event{At: now, Activity: "peer.user.add", Initiator: string(initiator), Target: string(p.ID),
			Meta: map[string]string{"name": p.Name, "ip": p.IP.String(), "temporary": "true"}}); err != nil {
			return err
		}
		for _, r := range rules {
			r.ID, r.Name, r.SourcePeer, r.DestinationPeer = uuid.NewString(), "Temporary access rule", p.ID, target
			pol := account.Policy{ID: account.PolicyID(uuid.NewString()), AccountID: acc, Enabled: true, Rules: []account.Rule{r},
				Name: "Temporary access policy for peer " + p.Name, Description: "Temporary access policy for peer " + p.Name}
			if err := at.PutPolicy(ctx, pol); err != nil {
				return err
			}
			if _, err := at.InsertEvent(ctx, account.Event{At: now, Activity: "policy.add", Initiator: string(initiator), Target: string(pol.ID),
				Meta: map[string]string{"name": pol.Name}}); err != nil {
				return err
			}
		}
		if _, err := at.BumpSerial(ctx); err != nil {
			return err
		}
		_, err = sameNetwork(ctx, at, a)
		return err
	})
	if err != nil {
		return account.Peer{}, err
	}
	s.log.Info("temporary peer created", "peer", p.ID, "ip", p.IP, "name", p.Name, "target", target, "user", initiator)
	return p, nil
}

// dropTemporary deletes the policies that name a temporary peer being
// deleted, with an event each.
func dropTemporary(ctx context.Context, at *store.AccountTx, id account.PeerID, initiator string, now time.Time) error {
	ps, err := at.Policies(ctx)
	if err != nil {
		return err
	}
	for _, pol := range ps {
		names := false
		for _, r := range pol.Rules {
			names = names || r.SourcePeer == id || r.DestinationPeer == id
		}
		if !names {
			continue
		}
		if err := at.DeletePolicy(ctx, pol.ID); err != nil {
			return err
		}
		if _, err := at.InsertEvent(ctx, account.Event{At: now, Activity: "policy.delete", Initiator: initiator, Target: string(pol.ID),
			Meta: map[string]string{"name": pol.Name}}); err != nil {
			return err
		}
	}
	return nil
}

// SyncEnded is told that a peer's current Sync stream on this instance
// ended (it was not replaced by a newer one). A temporary peer that is now
// offline, not held by a stream elsewhere, is removed with its policies.
func (s *Service) SyncEnded(ctx context.Context, acc account.ID, id account.PeerID) error {
	var p account.Peer
	err := s.store.Read(ctx, func(tx *store.Tx) error {
		var err error
		p, err = tx.In(acc).Peer(ctx, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sync ended: %w", err)
	}
	if !p.Temporary || p.Connected {
		return nil
	}
	if err := s.Delete(ctx, acc, id, initiatorDisconnect); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	s.log.Info("temporary peer disconnected and removed", "peer", id, "name", p.Name)
	return nil
}

// ExpireTemporary removes the temporary peers of every account offline,
// or never connected, for TemporaryOffline, with their policies.
func (s *Service) ExpireTemporary(ctx context.Context) error {
	var stale []account.Peer
	err := s.store.Read(ctx, func(tx *store.Tx) error {
		var err error
		stale, err = tx.StaleTemporaryPeers(ctx, s.now().Add(-TemporaryOffline).UnixNano())
		return err
	})
	if err != nil {
		return fmt.Errorf("expire temporary peers: %w", err)
	}
	for _, p := range stale {
		// Another instance may have removed it already.
		if err := s.Delete(ctx, p.AccountID, p.ID, initiatorExpiry); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		s.log.Info("temporary peer expired", "peer", p.ID, "name", p.Name)
	}
	return nil
}

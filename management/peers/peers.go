// Package peers registers, logs in and removes peers: it applies setup-key
// rules, allocates overlay addresses and unique DNS labels, and bumps the
// account serial in the same transaction so every change is ordered. It
// tells a Notifier which account changed; it knows nothing about gRPC.
package peers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/google/uuid"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/dnsname"
	"github.com/wiremesh/wiremesh/management/ipam"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
)

// ErrNotRegistered is returned for an unknown key that brought no way to register.
var ErrNotRegistered = errors.New("peer is not registered")

// Notifier learns that an account's network changed.
type Notifier interface {
	AccountChanged(id account.ID)
}

// Service is the peer lifecycle.
type Service struct {
	store  *store.Store
	notify Notifier
	log    *slog.Logger
	now    func() time.Time
}

// New returns a Service. log and now may be nil (discard, time.Now).
func New(st *store.Store, n Notifier, log *slog.Logger, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: st, notify: n, log: log, now: now}
}

// LoginInput is what a peer presents.
type LoginInput struct {
	Key       key.Public
	SetupKey  string
	Meta      account.Meta
	SSHPubKey string
	KeepSSH   bool // leave the stored SSH key as it is (metadata-only updates)
}

// Login returns the registered peer for in.Key, registering it with the
// setup key when it is new. An existing peer's reported hostname and SSH key
// are refreshed; a changed name is a network change.
func (s *Service) Login(ctx context.Context, in LoginInput) (account.Peer, account.Account, error) {
	var (
		peer    account.Peer
		acc     account.Account
		changed bool
	)
	// A concurrent registration elsewhere can take the address or label we
	// chose between our read and our insert; the unique index refuses it and
	// we try again with fresh state.
	for attempt := 0; ; attempt++ {
		var err error
		peer, acc, changed, err = s.login(ctx, in)
		if errors.Is(err, store.ErrConflict) && attempt < 5 {
			continue
		}
		if err != nil {
			return account.Peer{}, account.Account{}, err
		}
		break
	}
	if changed {
		s.notify.AccountChanged(acc.ID)
	}
	return peer, acc, nil
}

func (s *Service) login(ctx context.Context, in LoginInput) (peer account.Peer, acc account.Account, changed bool, err error) {
	now := s.now().UTC()
	err = s.store.Tx(ctx, func(tx *store.Tx) error {
		existing, err := tx.PeerByKey(ctx, in.Key)
		switch {
		case err == nil:
			peer, acc, changed, err = s.refresh(ctx, tx, existing, in, now)
			return err
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if in.SetupKey == "" {
			return ErrNotRegistered
		}
		peer, acc, err = s.register(ctx, tx, in, now)
		changed = err == nil
		return err
	})
	return peer, acc, changed, err
}

func (s *Service) refresh(ctx context.Context, tx *store.Tx, p account.Peer, in LoginInput, now time.Time) (account.Peer, account.Account, bool, error) {
	at := tx.In(p.AccountID)
	acc, err := at.Account(ctx)
	if err != nil {
		return p, acc, false, err
	}
	changed := false
	if in.Meta.Hostname != "" && in.Meta.Hostname != p.Meta.Hostname {
		// A new name needs a free label: queue behind other writers.
		if acc, err = at.Lock(ctx); err != nil {
			return p, acc, false, err
		}
		label, err := freeLabel(ctx, at, dnsname.Label(in.Meta.Hostname), p.ID)
		if err != nil {
			return p, acc, false, err
		}
		changed = label != p.DNSLabel || in.Meta.Hostname != p.Name
		p.Name, p.DNSLabel = in.Meta.Hostname, label
	}
	if !in.KeepSSH && in.SSHPubKey != p.SSHPubKey {
		changed = true
		p.SSHPubKey = in.SSHPubKey
	}
	if in.Meta.Hostname != "" {
		p.Meta = in.Meta
	}
	p.LastLogin = now
	if err := at.UpdatePeer(ctx, p); err != nil {
		return p, acc, false, err
	}
	if changed {
		if acc.Serial, err = at.BumpSerial(ctx); err != nil {
			return p, acc, false, err
		}
	}
	return p, acc, changed, nil
}

func (s *Service) register(ctx context.Context, tx *store.Tx, in LoginInput, now time.Time) (account.Peer, account.Account, error) {
	hash, err := setupkey.Parse(in.SetupKey)
	if err != nil {
		return account.Peer{}, account.Account{}, err
	}
	sk, err := tx.SetupKeyByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return account.Peer{}, account.Account{}, setupkey.ErrUnknown
	}
	if err != nil {
		return account.Peer{}, account.Account{}, err
	}
	if err := setupkey.Check(sk, now); err != nil {
		return account.Peer{}, account.Account{}, err
	}
	at := tx.In(sk.AccountID)
	// Network and domain never change: no lock needed to read them. The
	// address and label are picked optimistically and inserted only if
	// still free, so registrations in one account do not queue behind each
	// other until the last statements (the key use and the serial bump).
	acc, err := at.Account(ctx)
	if err != nil {
		return account.Peer{}, account.Account{}, err
	}
	name := in.Meta.Hostname
	if name == "" {
		name = "peer"
	}
	p := account.Peer{
		ID:         account.PeerID(uuid.NewString()),
		AccountID:  acc.ID,
		Key:        in.Key,
		Name:       name,
		Meta:       in.Meta,
		SSHPubKey:  in.SSHPubKey,
		SetupKeyID: sk.ID,
		Ephemeral:  sk.Ephemeral,
		CreatedAt:  now,
		LastLogin:  now,
		LastSeen:   now,
	}
	for attempt := 0; ; attempt++ {
		if p.IP, err = s.pickIP(ctx, at, acc.Network); err != nil {
			return account.Peer{}, account.Account{}, err
		}
		if p.DNSLabel, err = freeLabel(ctx, at, dnsname.Label(name), ""); err != nil {
			return account.Peer{}, account.Account{}, err
		}
		inserted, err := at.InsertPeerIfFree(ctx, p)
		if err != nil {
			return account.Peer{}, account.Account{}, err
		}
		if inserted {
			break
		}
		// A concurrent registration took the address or the label, or
		// registered this very key (then Login retries and finds it).
		if _, err := tx.PeerByKey(ctx, in.Key); err == nil || attempt >= 8 {
			return account.Peer{}, account.Account{}, fmt.Errorf("register: %w", store.ErrConflict)
		}
	}
	// Setup-key auto-groups (by ID or name) take the new peer in.
	for _, ref := range sk.AutoGroups {
		g, err := at.Group(ctx, account.GroupID(ref))
		if errors.Is(err, store.ErrNotFound) {
			g, err = at.GroupByName(ctx, ref)
		}
		if errors.Is(err, store.ErrNotFound) {
			s.log.Warn("setup key names a group that does not exist", "setup_key", sk.ID, "group", ref)
			continue
		}
		if err != nil {
			return account.Peer{}, account.Account{}, err
		}
		if !g.All {
			g.Peers = append(g.Peers, p.ID)
			if err := at.PutGroup(ctx, g); err != nil {
				return account.Peer{}, account.Account{}, err
			}
		}
	}
	ok, err := at.ConsumeSetupKey(ctx, sk.ID, now.UnixNano())
	if err != nil {
		return account.Peer{}, account.Account{}, err
	}
	if !ok {
		// Another registration used the last allowance since we read it;
		// the transaction rolls the peer back.
		return account.Peer{}, account.Account{}, setupkey.ErrExhausted
	}
	if acc.Serial, err = at.BumpSerial(ctx); err != nil {
		return account.Peer{}, account.Account{}, err
	}
	if _, err := at.InsertEvent(ctx, account.Event{At: now, Activity: "peer.add", Initiator: "setupkey:" + string(sk.ID), Target: string(p.ID),
		Meta: map[string]string{"name": p.Name, "ip": p.IP.String(), "setup_key": sk.Name}}); err != nil {
		return account.Peer{}, account.Account{}, err
	}
	s.log.Info("peer registered", "peer", p.ID, "ip", p.IP, "name", p.Name, "setup_key", sk.ID)
	return p, acc, nil
}

// pickIP returns a free address: random picks with indexed lookups, and a
// scan of every used address only when the network is nearly full.
func (s *Service) pickIP(ctx context.Context, at *store.AccountTx, network netip.Prefix) (netip.Addr, error) {
	ip, err := ipam.Pick(network, func(ip netip.Addr) (bool, error) { return at.IPTaken(ctx, ip) })
	if errors.Is(err, ipam.ErrCrowded) {
		var used map[netip.Addr]bool
		if used, err = at.UsedIPs(ctx); err == nil {
			ip, err = ipam.Next(network, used)
		}
	}
	return ip, err
}

// freeLabel returns base or the first free base-N among the account's
// peers other than self, with one indexed lookup per candidate.
func freeLabel(ctx context.Context, at *store.AccountTx, base string, self account.PeerID) (string, error) {
	var qerr error
	label := dnsname.Unique(base, func(l string) bool {
		if qerr != nil {
			return false
		}
		taken, err := at.LabelTaken(ctx, l, self)
		qerr = err
		return taken
	})
	return label, qerr
}

// Delete removes one of the account's peers and tells the account.
// initiator is recorded in the activity log.
func (s *Service) Delete(ctx context.Context, acc account.ID, id account.PeerID, initiator string) error {
	err := s.store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		p, err := at.Peer(ctx, id)
		if err != nil {
			return err
		}
		if err := at.DeletePeer(ctx, id); err != nil {
			return err
		}
		if _, err = at.BumpSerial(ctx); err != nil {
			return err
		}
		_, err = at.InsertEvent(ctx, account.Event{At: s.now().UTC(), Activity: "peer.delete", Initiator: initiator, Target: string(id),
			Meta: map[string]string{"name": p.Name, "ip": p.IP.String()}})
		return err
	})
	if err != nil {
		return fmt.Errorf("delete peer %s: %w", id, err)
	}
	s.notify.AccountChanged(acc)
	return nil
}

// SetConnected records whether a peer's Sync stream is open. It is not a
// network change (maps list peers whether or not they are online).
func (s *Service) SetConnected(ctx context.Context, acc account.ID, id account.PeerID, connected bool) error {
	return s.store.Tx(ctx, func(tx *store.Tx) error {
		return tx.In(acc).SetPeerConnected(ctx, id, connected, s.now().UnixNano())
	})
}

// UpdateMeta stores what a peer reports on Sync or SyncMeta.
func (s *Service) UpdateMeta(ctx context.Context, k key.Public, meta account.Meta) error {
	_, _, err := s.Login(ctx, LoginInput{Key: k, Meta: meta, KeepSSH: true})
	return err
}

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

// New returns a Service. now may be nil (time.Now).
func New(st *store.Store, n Notifier, log *slog.Logger, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
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
	acc, err := tx.Account(ctx, p.AccountID)
	if err != nil {
		return p, acc, false, err
	}
	changed := false
	if in.Meta.Hostname != "" && in.Meta.Hostname != p.Meta.Hostname {
		label, err := freeLabel(ctx, tx, acc.ID, dnsname.Label(in.Meta.Hostname), p.ID)
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
	if err := tx.UpdatePeer(ctx, p); err != nil {
		return p, acc, false, err
	}
	if changed {
		if acc.Serial, err = tx.BumpSerial(ctx, acc.ID); err != nil {
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
	ok, err := tx.ConsumeSetupKey(ctx, sk.ID, now.UnixNano())
	if err != nil {
		return account.Peer{}, account.Account{}, err
	}
	if !ok {
		// Another registration used the last allowance since we read it.
		return account.Peer{}, account.Account{}, setupkey.ErrExhausted
	}
	acc, err := tx.Account(ctx, sk.AccountID)
	if err != nil {
		return account.Peer{}, account.Account{}, err
	}
	existing, err := tx.Peers(ctx, acc.ID)
	if err != nil {
		return account.Peer{}, account.Account{}, err
	}
	used := make(map[netip.Addr]bool, len(existing))
	labels := make(map[string]bool, len(existing))
	for _, p := range existing {
		used[p.IP] = true
		labels[p.DNSLabel] = true
	}
	ip, err := ipam.Next(acc.Network, used)
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
		IP:         ip,
		Name:       name,
		DNSLabel:   dnsname.Unique(dnsname.Label(name), func(l string) bool { return labels[l] }),
		Meta:       in.Meta,
		SSHPubKey:  in.SSHPubKey,
		SetupKeyID: sk.ID,
		Ephemeral:  sk.Ephemeral,
		CreatedAt:  now,
		LastLogin:  now,
		LastSeen:   now,
	}
	if err := tx.InsertPeer(ctx, p); err != nil {
		return account.Peer{}, account.Account{}, err
	}
	if acc.Serial, err = tx.BumpSerial(ctx, acc.ID); err != nil {
		return account.Peer{}, account.Account{}, err
	}
	s.log.Info("peer registered", "peer", p.ID, "ip", p.IP, "name", p.Name, "setup_key", sk.ID)
	return p, acc, nil
}

func freeLabel(ctx context.Context, tx *store.Tx, acc account.ID, base string, self account.PeerID) (string, error) {
	ps, err := tx.Peers(ctx, acc)
	if err != nil {
		return "", err
	}
	taken := map[string]bool{}
	for _, p := range ps {
		if p.ID != self {
			taken[p.DNSLabel] = true
		}
	}
	return dnsname.Unique(base, func(l string) bool { return taken[l] }), nil
}

// Delete removes a peer and tells its account.
func (s *Service) Delete(ctx context.Context, id account.PeerID) error {
	var acc account.ID
	err := s.store.Tx(ctx, func(tx *store.Tx) error {
		p, err := tx.Peer(ctx, id)
		if err != nil {
			return err
		}
		acc = p.AccountID
		if err := tx.DeletePeer(ctx, id); err != nil {
			return err
		}
		_, err = tx.BumpSerial(ctx, acc)
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
func (s *Service) SetConnected(ctx context.Context, id account.PeerID, connected bool) error {
	return s.store.Tx(ctx, func(tx *store.Tx) error {
		return tx.SetPeerConnected(ctx, id, connected, s.now().UnixNano())
	})
}

// UpdateMeta stores what a peer reports on Sync or SyncMeta.
func (s *Service) UpdateMeta(ctx context.Context, k key.Public, meta account.Meta) error {
	_, _, err := s.Login(ctx, LoginInput{Key: k, Meta: meta, KeepSSH: true})
	return err
}

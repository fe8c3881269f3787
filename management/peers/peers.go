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
	"reflect"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/dnsname"
	"github.com/wiremesh/wiremesh/management/ipam"
	"github.com/wiremesh/wiremesh/management/routing"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/v6addr"
)

// Errors callers check with errors.Is.
var (
	// ErrNotRegistered is an unknown key that brought no way to register.
	ErrNotRegistered = errors.New("peer is not registered")
	// ErrLoginExpired is a peer added by a user whose login expired; the
	// official client matches the text "peer login has expired".
	ErrLoginExpired = errors.New("peer login has expired, please log in once more")
	// ErrUserBlocked is a peer whose user is blocked.
	ErrUserBlocked = errors.New("the user of this peer is blocked")
	// ErrOtherUser is a peer registered by another user.
	ErrOtherUser = errors.New("peer is registered by another user")
	// ErrSSHKeyTaken is an SSH key another peer of the account already
	// reports: peers' SSH servers authorize clients by it, so a second
	// holder could pass for the first.
	ErrSSHKeyTaken = errors.New("peer_keys.ssh_pub_key: another peer of this account already reports this SSH public key")
)

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
	conn   groupCommit // connected-state writes
	// Instance names this management instance in connected-state records
	// (set before use; empty is fine for a single instance).
	Instance string
	// States learns of each recorded change of one peer: its connected
	// state, and an update or deletion, with the peer's owner (set before
	// use; nil: nobody). The REST API's live streams want it: a user who
	// sees only its own peers hears no account-wide peer change.
	States StateNotifier
}

// StateNotifier learns which peers changed, beside the network-change
// notifier.
type StateNotifier interface {
	// PeerChanged: the peer changed; owner is its user ("": not looked
	// up, or none).
	PeerChanged(acc account.ID, id account.PeerID, owner account.UserID)
	// MembershipChanged: a peer joined or left the account, so the
	// groups' peer counts moved (an agent's login alone does not).
	MembershipChanged(acc account.ID)
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
	// User logged in through SSO (a verified JWT): it registers the peer
	// in its account, or renews the login of a peer it added.
	User *account.User
}

// Login returns the registered peer for in.Key, registering it with the
// setup key when it is new. An existing peer's reported hostname and SSH key
// are refreshed; a changed name is a network change.
func (s *Service) Login(ctx context.Context, in LoginInput) (account.Peer, account.Account, error) {
	var (
		peer            account.Peer
		acc             account.Account
		changed, joined bool
	)
	// A concurrent registration elsewhere can take the address or label we
	// chose between our read and our insert; the unique index refuses it and
	// we try again with fresh state.
	for attempt := 0; ; attempt++ {
		var err error
		peer, acc, changed, joined, err = s.login(ctx, in)
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
		if s.States != nil {
			s.States.PeerChanged(acc.ID, peer.ID, peer.UserID)
			if joined {
				s.States.MembershipChanged(acc.ID)
			}
		}
	}
	return peer, acc, nil
}

// login is Login's transaction; joined: the peer registered now.
func (s *Service) login(ctx context.Context, in LoginInput) (peer account.Peer, acc account.Account, changed, joined bool, err error) {
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
		if in.User != nil {
			peer, acc, err = s.registerUser(ctx, tx, in, now)
			changed, joined = err == nil, err == nil
			return err
		}
		if in.SetupKey == "" {
			return ErrNotRegistered
		}
		peer, acc, err = s.register(ctx, tx, in, now)
		changed, joined = err == nil, err == nil
		return err
	})
	return peer, acc, changed, joined, err
}

func (s *Service) refresh(ctx context.Context, tx *store.Tx, p account.Peer, in LoginInput, now time.Time) (account.Peer, account.Account, bool, error) {
	at := tx.In(p.AccountID)
	acc, err := at.Account(ctx)
	if err != nil {
		return p, acc, false, err
	}
	changed := false
	if p.Temporary && (in.User != nil || in.SetupKey != "") {
		// A temporary peer's key was given by an admin for the browser
		// client, which logs in with the key alone: a device that later
		// registers that key with a setup key or SSO must not land in the
		// temporary peer's account.
		return p, acc, false, ErrOtherUser
	}
	if p.UserID != "" {
		if in.User != nil && in.User.ID != p.UserID {
			return p, acc, false, ErrOtherUser
		}
		u, err := at.User(ctx, p.UserID)
		if err == nil && u.Blocked {
			return p, acc, false, ErrUserBlocked
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return p, acc, false, err
		}
		if in.User == nil {
			if acc.Settings.Expired(p, now) {
				return p, acc, false, ErrLoginExpired
			}
		} else if acc.Settings.Expired(p, now) {
			// A renewed login brings an expired peer back into the maps.
			changed = true
		}
	}
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
		// Queue behind other writers so two peers cannot both take the
		// same key.
		if acc, err = at.Lock(ctx); err != nil {
			return p, acc, false, err
		}
		if err := sshKeyFree(ctx, at, in.SSHPubKey, p.ID); err != nil {
			return p, acc, false, err
		}
		changed = true
		p.SSHPubKey = in.SSHPubKey
	}
	metaChanged := false
	if in.Meta.Hostname != "" {
		// What posture checks read (versions, addresses, processes) can
		// change which policies apply to the peer.
		changed = changed || postureMeta(p.Meta) != postureMeta(in.Meta)
		metaChanged = !reflect.DeepEqual(p.Meta, in.Meta)
		// Whether the agent takes the IPv6 overlay decides what every
		// peer's map says about it (address, allowed IPs, AAAA records).
		changed = changed || p.SupportsIPv6() != (account.Peer{Meta: in.Meta}).SupportsIPv6()
		p.Meta = in.Meta
		var got bool
		acc, got, err = v6addr.Assign(ctx, at, acc, &p)
		if err != nil {
			return p, acc, false, err
		}
		changed = changed || got
	}
	if in.KeepSSH && !changed && !metaChanged {
		// A metadata report (every Sync start) that changes nothing costs
		// no write.
		return p, acc, false, nil
	}
	// The login time of a peer added by a user is when its user last
	// authenticated (it drives login expiration); other peers log in with
	// their key alone.
	if p.UserID == "" || in.User != nil {
		p.LastLogin = now
	}
	if err := at.UpdatePeer(ctx, p); err != nil {
		return p, acc, false, err
	}
	if p.UserID != "" && in.User != nil {
		// The user authenticated again for its peer (SSO), as the
		// reference records it.
		if _, err := at.InsertEvent(ctx, account.Event{At: now, Activity: "user.peer.login", Initiator: string(p.UserID), Target: string(p.ID),
			Meta: map[string]string{"name": p.Name}}); err != nil {
			return p, acc, false, err
		}
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
	// The network is read without a lock (sameNetwork checks it again once
	// the serial bump holds the account row). The address and label are
	// picked optimistically and inserted only if still free, so
	// registrations in one account do not queue behind each other until
	// the last statements (the key use and the serial bump).
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
		// With peer approval on, the peer waits for an admin.
		ApprovalRequired: acc.Settings.Extra.PeerApprovalEnabled,
	}
	if err := s.insert(ctx, tx, at, acc, &p, sk.AutoGroups); err != nil {
		return account.Peer{}, account.Account{}, err
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
	// Once the serial bump holds the account row, as group changes do,
	// by the account as it is now (the settings may have changed since
	// it was read).
	if acc, err = sameNetwork(ctx, at, acc); err != nil {
		return account.Peer{}, account.Account{}, err
	}
	if acc, _, err = v6addr.Assign(ctx, at, acc, &p); err != nil {
		return account.Peer{}, account.Account{}, err
	}
	if _, err := at.InsertEvent(ctx, account.Event{At: now, Activity: "peer.setupkey.add", Initiator: "setupkey:" + string(sk.ID), Target: string(p.ID),
		Meta: pendingMeta(p, map[string]string{"name": p.Name, "ip": p.IP.String(), "setup_key": sk.Name})}); err != nil {
		return account.Peer{}, account.Account{}, err
	}
	s.log.Info("peer registered", "peer", p.ID, "ip", p.IP, "name", p.Name, "setup_key", sk.ID, "pending_approval", p.ApprovalRequired)
	return p, acc, nil
}

// insert adds a new peer with a free address and DNS label and puts it in
// its auto-groups (by ID or name).
func (s *Service) insert(ctx context.Context, tx *store.Tx, at *store.AccountTx, acc account.Account, p *account.Peer, autoGroups []string) error {
	if err := sshKeyFree(ctx, at, p.SSHPubKey, p.ID); err != nil {
		return err
	}
	var err error
	for attempt := 0; ; attempt++ {
		if p.IP, err = s.pickIP(ctx, at, acc.Network); err != nil {
			return err
		}
		if p.DNSLabel, err = freeLabel(ctx, at, dnsname.Label(p.Name), ""); err != nil {
			return err
		}
		inserted, err := at.InsertPeerIfFree(ctx, *p)
		if err != nil {
			return err
		}
		if inserted {
			break
		}
		// A concurrent registration took the address or the label, or
		// registered this very key (then Login retries and finds it).
		if _, err := tx.PeerByKey(ctx, p.Key); err == nil || attempt >= 8 {
			return fmt.Errorf("register: %w", store.ErrConflict)
		}
	}
	// Auto-groups (of the setup key or the user, by ID or name) take the
	// new peer in.
	for _, ref := range autoGroups {
		g, err := at.Group(ctx, account.GroupID(ref))
		if errors.Is(err, store.ErrNotFound) {
			g, err = at.GroupByName(ctx, ref)
		}
		if errors.Is(err, store.ErrNotFound) {
			s.log.Warn("auto-group does not exist", "peer", p.ID, "group", ref)
			continue
		}
		if err != nil {
			return err
		}
		if !g.All {
			g.Peers = append(g.Peers, p.ID)
			if err := at.PutGroup(ctx, g); err != nil {
				return err
			}
		}
	}
	return nil
}

// registerUser adds a peer for a user who logged in through SSO: in the
// user's account, with the user's auto-groups, its login subject to the
// account's login expiration.
func (s *Service) registerUser(ctx context.Context, tx *store.Tx, in LoginInput, now time.Time) (account.Peer, account.Account, error) {
	u := in.User
	if u.Blocked {
		return account.Peer{}, account.Account{}, ErrUserBlocked
	}
	at := tx.In(u.AccountID)
	acc, err := at.Account(ctx)
	if err != nil {
		return account.Peer{}, account.Account{}, err
	}
	name := in.Meta.Hostname
	if name == "" {
		name = "peer"
	}
	p := account.Peer{ID: account.PeerID(uuid.NewString()), AccountID: acc.ID, Key: in.Key, Name: name, Meta: in.Meta, SSHPubKey: in.SSHPubKey,
		UserID: u.ID, LoginExpirationEnabled: true, CreatedAt: now, LastLogin: now, LastSeen: now,
		ApprovalRequired: acc.Settings.Extra.PeerApprovalEnabled}
	if err := s.insert(ctx, tx, at, acc, &p, u.AutoGroups); err != nil {
		return account.Peer{}, account.Account{}, err
	}
	if acc.Serial, err = at.BumpSerial(ctx); err != nil {
		return account.Peer{}, account.Account{}, err
	}
	// Once the serial bump holds the account row, as group changes do,
	// by the account as it is now (the settings may have changed since
	// it was read).
	if acc, err = sameNetwork(ctx, at, acc); err != nil {
		return account.Peer{}, account.Account{}, err
	}
	if acc, _, err = v6addr.Assign(ctx, at, acc, &p); err != nil {
		return account.Peer{}, account.Account{}, err
	}
	if _, err := at.InsertEvent(ctx, account.Event{At: now, Activity: "peer.user.add", Initiator: string(u.ID), Target: string(p.ID),
		Meta: pendingMeta(p, map[string]string{"name": p.Name, "ip": p.IP.String(), "email": u.Email})}); err != nil {
		return account.Peer{}, account.Account{}, err
	}
	s.log.Info("peer registered by user", "peer", p.ID, "ip", p.IP, "name", p.Name, "user", u.ID, "pending_approval", p.ApprovalRequired)
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
	var owner account.UserID
	err := s.store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		p, err := at.Peer(ctx, id)
		owner = p.UserID
		if err != nil {
			return err
		}
		// A network router of this peer alone would route nowhere:
		// NetBird refuses, so the admin moves or deletes the router first.
		if err := routing.PeerLinked(ctx, at, id); err != nil {
			return err
		}
		if err := at.DeletePeer(ctx, id); err != nil {
			return err
		}
		now := s.now().UTC()
		if p.Temporary {
			// Its policies go with it, however it is deleted.
			if err := dropTemporary(ctx, at, id, initiator, now); err != nil {
				return err
			}
		}
		if _, err = at.BumpSerial(ctx); err != nil {
			return err
		}
		_, err = at.InsertEvent(ctx, account.Event{At: now, Activity: "user.peer.delete", Initiator: initiator, Target: string(id),
			Meta: map[string]string{"name": p.Name, "ip": p.IP.String()}})
		return err
	})
	if err != nil {
		return fmt.Errorf("delete peer %s: %w", id, err)
	}
	s.notify.AccountChanged(acc)
	if s.States != nil {
		// Gone from the store: only the owner named here tells its
		// streams it was theirs.
		s.States.PeerChanged(acc, id, owner)
		s.States.MembershipChanged(acc)
	}
	return nil
}

// UpdateMeta stores what a peer reports on Sync or SyncMeta.
func (s *Service) UpdateMeta(ctx context.Context, k key.Public, meta account.Meta) error {
	_, _, err := s.Login(ctx, LoginInput{Key: k, Meta: meta, KeepSSH: true})
	return err
}

// UpdateInput is a peer's changeable state (the REST API's PeerRequest).
type UpdateInput struct {
	Name            string
	LoginExpiration bool
	// ApprovalRequired, when set, approves a pending peer (false) or
	// makes an approved one pending again (true, only while the account's
	// peer approval is on). nil leaves it as it is.
	ApprovalRequired *bool
	// SSHEnabled, when set, switches the peer's SSH server on or off (the
	// map's SSHConfig.sshEnabled). nil leaves it as it is.
	SSHEnabled *bool
	// IPv6, when set, is the peer's new IPv6 overlay address (it must be
	// in an IPv6-enabled group). nil leaves it as it is.
	IPv6 *netip.Addr
}

// ErrPrecondition is a request the account's state does not allow now
// (REST 412), such as an IPv6 address for a peer in no IPv6-enabled group.
var ErrPrecondition = errors.New("precondition failed")

// Update renames a peer (its DNS label follows), switches its login
// expiration and SSH server and approves it or revokes its approval, in one
// transaction.
func (s *Service) Update(ctx context.Context, acc account.ID, id account.PeerID, in UpdateInput, initiator string) (account.Peer, error) {
	name := strings.TrimSpace(in.Name)
	if name == "" || len(name) > 255 {
		return account.Peer{}, fmt.Errorf("%w: a peer name must have 1 to 255 characters", ErrInvalid)
	}
	var p account.Peer
	err := s.store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		a, err := at.Lock(ctx)
		if err != nil {
			return err
		}
		if p, err = at.Peer(ctx, id); err != nil {
			return err
		}
		was := p
		if p.Name != name {
			if p.DNSLabel, err = freeLabel(ctx, at, dnsname.Label(name), p.ID); err != nil {
				return err
			}
		}
		p.Name, p.LoginExpirationEnabled = name, in.LoginExpiration && p.UserID != ""
		if in.SSHEnabled != nil {
			p.SSHEnabled = *in.SSHEnabled
		}
		if err := at.UpdatePeerName(ctx, p); err != nil {
			return err
		}
		if in.IPv6 != nil && *in.IPv6 != p.IPv6 {
			switch err := v6addr.Set(ctx, at, a, p, *in.IPv6); {
			case errors.Is(err, v6addr.ErrNotEnabled):
				return fmt.Errorf("%w: ipv6: %w", ErrPrecondition, err)
			case errors.Is(err, v6addr.ErrBadAddress):
				return fmt.Errorf("%w: %w", ErrInvalid, err)
			case err != nil:
				return err
			}
			p.IPv6 = *in.IPv6
		}
		now := s.now().UTC()
		if in.ApprovalRequired != nil && *in.ApprovalRequired != p.ApprovalRequired {
			if err := setApproval(ctx, at, a.Settings, &p, *in.ApprovalRequired, initiator, now); err != nil {
				return err
			}
		}
		if _, err := at.BumpSerial(ctx); err != nil {
			return err
		}
		// One event per change, with the reference's codes.
		meta := map[string]string{"name": name, "dns_label": p.DNSLabel}
		var events []string
		if was.Name != p.Name {
			events, meta["old_name"] = append(events, "peer.rename"), was.Name
		}
		if was.LoginExpirationEnabled != p.LoginExpirationEnabled {
			events = append(events, map[bool]string{true: "peer.login.expiration.enable", false: "peer.login.expiration.disable"}[p.LoginExpirationEnabled])
		}
		if was.SSHEnabled != p.SSHEnabled {
			events = append(events, map[bool]string{true: "peer.ssh.enable", false: "peer.ssh.disable"}[p.SSHEnabled])
		}
		if was.IPv6 != p.IPv6 {
			events = append(events, "peer.ip.update")
			meta["old_ipv6"], meta["ipv6"] = was.IPv6.String(), p.IPv6.String()
		}
		for _, activity := range events {
			if _, err := at.InsertEvent(ctx, account.Event{At: now, Activity: activity, Initiator: initiator, Target: string(id), Meta: meta}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return account.Peer{}, fmt.Errorf("update peer %s: %w", id, err)
	}
	s.notify.AccountChanged(acc)
	if s.States != nil {
		s.States.PeerChanged(acc, id, p.UserID)
	}
	return p, nil
}

// ErrInvalid is a request that breaks a rule.
var ErrInvalid = errors.New("invalid request")

// ExpireLogins announces the peers whose user login expired after since
// (and up to now): it bumps the serial of their accounts, so every map
// drops them and their own streams end with "peer login has expired". It
// reads the accounts and, per expiration in use, a narrow window of peers.
// seen remembers what was announced, against repeats at the window's
// edges; the caller keeps it between calls.
func (s *Service) ExpireLogins(ctx context.Context, since time.Time, seen map[account.PeerID]time.Time) error {
	return s.expire(ctx, since, seen, sweep{
		duration: func(set account.Settings) time.Duration {
			if !set.PeerLoginExpirationEnabled {
				return 0
			}
			return time.Duration(set.PeerLoginExpiration) * time.Second
		},
		between: func(ctx context.Context, tx *store.Tx, after, before int64) ([]account.Peer, error) {
			return tx.LoginsBetween(ctx, after, before)
		},
		expired: func(set account.Settings, p account.Peer, now time.Time) bool {
			return !p.LastLogin.Add(time.Duration(set.PeerLoginExpiration) * time.Second).After(now)
		},
		mark: func(p account.Peer) time.Time { return p.LastLogin },
		log:  "peer login expired",
	})
}

// postureMeta is the part of a peer's metadata posture checks read.
func postureMeta(m account.Meta) string {
	return fmt.Sprint(m.NetbirdVersion, m.GoOS, m.OSVersion, m.KernelVersion, m.Addresses, m.ConnectionIP, m.Files)
}

// sshKeyFree refuses an SSH public key (authorized_keys form) that a peer
// of the account other than self already reports; keys are compared by
// type and key material, whatever their comments.
func sshKeyFree(ctx context.Context, at *store.AccountTx, k string, self account.PeerID) error {
	want := sshKeyMaterial(k)
	if want == "" {
		return nil
	}
	ps, err := at.Peers(ctx)
	if err != nil {
		return err
	}
	for _, o := range ps {
		if o.ID != self && sshKeyMaterial(o.SSHPubKey) == want {
			return ErrSSHKeyTaken
		}
	}
	return nil
}

// sshKeyMaterial is an authorized_keys line without its comment.
func sshKeyMaterial(k string) string {
	f := strings.Fields(k)
	if len(f) < 2 {
		return strings.TrimSpace(k)
	}
	return f[0] + " " + f[1]
}

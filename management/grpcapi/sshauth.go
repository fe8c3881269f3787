package grpcapi

import (
	"context"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"golang.org/x/crypto/blake2b"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// NetBird's JWT check for SSH: a peer whose SSH server management enables
// gets, when the server has an identity provider, a jwtConfig (whose
// tokens its server accepts) and an sshAuth (which users: the account's
// users, hashed). NetBird's `netbird ssh` logs in with such a token, and
// NetBird's agents start their SSH server only with a jwtConfig. Our
// agents accept both the token and their peers' SSH keys.

// SSHJWT is the identity provider as agents' SSH servers check tokens.
type SSHJWT struct {
	Issuer       string
	Audiences    []string
	KeysLocation string // the provider's JWKS URL
	MaxTokenAge  time.Duration
}

// SSHJWTSource is implemented by an SSO whose tokens agents' SSH servers
// may accept.
type SSHJWTSource interface {
	SSHJWT(ctx context.Context) (SSHJWT, error)
}

// sshUserClaim is the claim holding the user ID: our users' IDs are their
// tokens' subjects.
const sshUserClaim = "sub"

// sshAuthCache holds each account's sshAuth for one account serial (every
// map of a state shares it, one read per state). Keying by serial is
// right because every change of the set of users sshAuth lists bumps the
// serial (management/users/sshusers.go; blocking and deleting do anyway).
type sshAuthCache struct {
	mu    sync.Mutex
	byAcc map[account.ID]sshAuthEntry
}

type sshAuthEntry struct {
	serial uint64
	auth   *mgmtpb.SSHAuth
	fp     uint64
}

// sshJWTConfig is the jwtConfig for agents (nil: no identity provider, or
// it cannot say where its keys are now).
func (s *Server) sshJWTConfig(ctx context.Context) *mgmtpb.JWTConfig {
	src, ok := s.o.SSO.(SSHJWTSource)
	if !ok || src == nil {
		return nil
	}
	j, err := src.SSHJWT(ctx)
	if err != nil || j.Issuer == "" || len(j.Audiences) == 0 || j.KeysLocation == "" {
		if err != nil {
			s.o.Log.WarnContext(ctx, "SSH: no jwtConfig for agents: identity provider not usable", "err", err)
		}
		return nil
	}
	return &mgmtpb.JWTConfig{Issuer: j.Issuer, Audience: j.Audiences[0], Audiences: j.Audiences,
		KeysLocation: j.KeysLocation, MaxTokenAge: int64(j.MaxTokenAge / time.Second)}
}

// sshAuthOf is the account's sshAuth at serial: its active users (not
// blocked, not pending approval, not service users), each allowed as any
// local user (NetBird's legacy SSH rule), and the fingerprint of it.
func (s *Server) sshAuthOf(ctx context.Context, acc account.ID, serial uint64) (*mgmtpb.SSHAuth, uint64, error) {
	c := &s.sshAuth
	c.mu.Lock()
	if e, ok := c.byAcc[acc]; ok && e.serial == serial {
		c.mu.Unlock()
		return e.auth, e.fp, nil
	}
	c.mu.Unlock()
	var us []account.User
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		us, err = tx.In(acc).Users(ctx)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	auth := sshAuthFor(us)
	var h maphash.Hash
	h.SetSeed(s.fpSeed)
	for _, u := range auth.AuthorizedUsers {
		h.Write(u)
	}
	e := sshAuthEntry{serial: serial, auth: auth, fp: h.Sum64()}
	c.mu.Lock()
	if c.byAcc == nil {
		c.byAcc = map[account.ID]sshAuthEntry{}
	}
	if old, ok := c.byAcc[acc]; !ok || old.serial <= serial {
		c.byAcc[acc] = e
	}
	c.mu.Unlock()
	return auth, e.fp, nil
}

// sshAuthFor builds sshAuth from the account's users (in a stable order,
// so an unchanged list encodes the same).
func sshAuthFor(us []account.User) *mgmtpb.SSHAuth {
	ids := make([]string, 0, len(us))
	for _, u := range us {
		if u.Blocked || u.ServiceUser || u.PendingApproval {
			continue
		}
		ids = append(ids, string(u.ID))
	}
	slices.Sort(ids)
	a := &mgmtpb.SSHAuth{UserIDClaim: sshUserClaim, MachineUsers: map[string]*mgmtpb.MachineUserIndexes{}}
	all := &mgmtpb.MachineUserIndexes{}
	for i, id := range ids {
		a.AuthorizedUsers = append(a.AuthorizedUsers, hashUserID(id))
		all.Indexes = append(all.Indexes, uint32(i))
	}
	a.MachineUsers["*"] = all
	return a
}

// hashUserID is how sshAuth lists a user: BLAKE2b-128 of the ID.
func hashUserID(id string) []byte {
	h, _ := blake2b.New(16, nil) // fails only for a bad size or key
	h.Write([]byte(id))
	return h.Sum(nil)
}

// addSSHAuth puts jwtConfig into pc and sshAuth into nm (nm may be nil)
// for self when its SSH server is enabled and there is an identity
// provider. It returns the sshAuth's fingerprint (0: none sent).
func (s *Server) addSSHAuth(ctx context.Context, self account.Peer, serial uint64, pc *mgmtpb.PeerConfig, nm *mgmtpb.NetworkMap) uint64 {
	if !self.SSHEnabled || pc == nil {
		return 0
	}
	jc := s.sshJWTConfig(ctx)
	if jc == nil {
		return 0
	}
	if pc.SshConfig == nil {
		pc.SshConfig = &mgmtpb.SSHConfig{SshEnabled: true}
	}
	pc.SshConfig.JwtConfig = jc
	if nm == nil {
		return 0
	}
	auth, fp, err := s.sshAuthOf(ctx, self.AccountID, serial)
	if err != nil {
		// Without sshAuth agents let no one in with a token: safe, and
		// the next map tries again.
		s.o.Log.WarnContext(ctx, "SSH: account's users not read; map sent without sshAuth", "peer", self.ID, "err", err)
		return 0
	}
	nm.SshAuth = auth
	return fp
}

// sshFingerprint is what addSSHAuth would return for peer id's map of
// state ix, for a stream to tell whether the users changed.
func (s *Server) sshFingerprint(ctx context.Context, ix *networkmap.Index, id account.PeerID) uint64 {
	self, ok := ix.Peer(id)
	if !ok || !self.SSHEnabled {
		return 0
	}
	if s.sshJWTConfig(ctx) == nil {
		return 0
	}
	_, fp, err := s.sshAuthOf(ctx, self.AccountID, ix.Serial())
	if err != nil {
		return 0
	}
	return fp
}

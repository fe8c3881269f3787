package engine

import (
	"slices"
	"time"

	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// sshJWTState is what the maps said about NetBird's JWT check for this
// peer's SSH server: jwtConfig comes with the peer config and sshAuth
// with the map, and either may be left out of a map that does not change
// it (as NetBird's agent reads them).
type sshJWTState struct {
	cfg   *mgmtpb.JWTConfig // nil: no token logins
	users *sshserver.Users
	v     *sshserver.JWTVerifier // kept while cfg is unchanged (it caches the provider's keys)
}

// sshJWT returns the token login map nm allows (nil: none), with e.mu
// held.
func (e *Engine) sshJWT(nm *mgmtpb.NetworkMap) *sshserver.JWTAuth {
	st := &e.ssh.jwt
	if pc := nm.GetPeerConfig(); pc != nil {
		st.cfg = pc.GetSshConfig().GetJwtConfig()
	}
	if sa := nm.GetSshAuth(); sa != nil {
		st.users = sshUsers(sa, e.log.Warn)
	}
	if st.cfg == nil {
		st.v = nil
		return nil
	}
	cfg := jwtConfigOf(st.cfg)
	if st.v == nil || !sameJWTConfig(st.v.Config(), cfg) {
		v, err := sshserver.NewJWTVerifier(cfg, nil, nil, nil)
		if err != nil {
			e.log.Warn("SSH: management's jwtConfig not usable; no token logins", "err", err)
			st.v = nil
			return nil
		}
		st.v = v
	}
	return &sshserver.JWTAuth{Verifier: st.v, Users: st.users}
}

// jwtConfigOf reads jwtConfig; an old server sets only the deprecated
// single audience.
func jwtConfigOf(c *mgmtpb.JWTConfig) sshserver.JWTConfig {
	auds := c.GetAudiences()
	if len(auds) == 0 && c.GetAudience() != "" {
		auds = []string{c.GetAudience()}
	}
	return sshserver.JWTConfig{Issuer: c.GetIssuer(), Audiences: auds, KeysLocation: c.GetKeysLocation(),
		MaxTokenAge: time.Duration(c.GetMaxTokenAge()) * time.Second}
}

func sameJWTConfig(a, b sshserver.JWTConfig) bool {
	if b.MaxTokenAge <= 0 {
		b.MaxTokenAge = sshserver.DefaultMaxTokenAge
	}
	return a.Issuer == b.Issuer && a.KeysLocation == b.KeysLocation && a.MaxTokenAge == b.MaxTokenAge && slices.Equal(a.Audiences, b.Audiences)
}

// sshUsers reads sshAuth. A malformed one lets no one in (NetBird's agent
// ignores it and keeps the previous one; failing closed is safer).
func sshUsers(sa *mgmtpb.SSHAuth, warn func(string, ...any)) *sshserver.Users {
	u := &sshserver.Users{Claim: sa.GetUserIDClaim(), Machine: map[string][]uint32{}}
	for _, h := range sa.GetAuthorizedUsers() {
		if len(h) != len(sshserver.UserHash{}) {
			warn("SSH: management's sshAuth has a user hash of the wrong length; no token logins", "len", len(h))
			return &sshserver.Users{}
		}
		u.Hashes = append(u.Hashes, sshserver.UserHash(h))
	}
	for local, ix := range sa.GetMachineUsers() {
		u.Machine[local] = ix.GetIndexes()
	}
	return u
}

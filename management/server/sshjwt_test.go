package server_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/blake2b"

	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/tenant"
	"github.com/wiremesh/wiremesh/management/turncreds"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

func userHash(id string) string {
	h, _ := blake2b.New(16, nil)
	h.Write([]byte(id))
	return hex.EncodeToString(h.Sum(nil))
}

func hashes(a *mgmtpb.SSHAuth) []string {
	var out []string
	for _, h := range a.GetAuthorizedUsers() {
		out = append(out, hex.EncodeToString(h))
	}
	slices.Sort(out)
	return out
}

// TestSSHJWTInMap: with the built-in identity provider, an SSH-enabled
// peer gets NetBird's jwtConfig at login and in its maps (the provider's
// issuer and JWKS URL, the agent's and dashboard's client IDs, 600 s) and
// sshAuth (the account's active users, hashed as NetBird's agents compare
// them, any local user); a user who joins later is in the next map,
// deltas or not; a peer without SSH gets neither; without an identity
// provider nothing is sent.
func TestSSHJWTInMap(t *testing.T) {
	e := startWith(t, t.TempDir(), server.Options{Identity: server.Identity{BuiltInIssuer: autoIssuer}})
	anon := e.api("")
	setup := obj(anon.call("POST", "/api/setup", map[string]any{"email": "owner@example.com", "password": "Owner-passw0rd!", "name": "Owner", "create_pat": true, "pat_expire_in": 2}, 200))
	owner := e.api("Token " + setup["personal_access_token"].(string))
	ownerID := setup["user_id"].(string)
	_, secret := e.setupKey(setupkey.Options{Reusable: true})
	c := ctx(t)
	host, other := testpeer.New(e.conn, "ssh-host"), testpeer.New(e.conn, "other")
	host.Deltas = true
	for _, p := range []*testpeer.Peer{host, other} {
		if _, err := p.Login(c, secret); err != nil {
			t.Fatal(err)
		}
	}
	ids := map[string]string{}
	for _, p := range list(owner.call("GET", "/api/peers", nil, 200)) {
		ids[obj(p)["name"].(string)] = obj(p)["id"].(string)
	}
	owner.call("PUT", "/api/peers/"+ids["ssh-host"], map[string]any{"name": "ssh-host", "ssh_enabled": true, "login_expiration_enabled": false}, 200)

	lr, err := host.Login(c, secret)
	if err != nil {
		t.Fatal(err)
	}
	jc := lr.GetPeerConfig().GetSshConfig().GetJwtConfig()
	if jc == nil {
		t.Fatalf("login response of an SSH-enabled peer without jwtConfig: %v", lr.GetPeerConfig())
	}
	if !strings.HasPrefix(jc.GetIssuer(), "http://"+e.addr) || jc.GetMaxTokenAge() != 600 || len(jc.GetAudiences()) != 2 || jc.GetAudience() != jc.GetAudiences()[0] {
		t.Errorf("jwtConfig %v", jc)
	}
	// The JWKS URL serves the provider's keys, and the issuer is the one
	// its discovery document names.
	var jwks struct{ Keys []map[string]any }
	if err := getJSON(jc.GetKeysLocation(), &jwks); err != nil || len(jwks.Keys) == 0 {
		t.Errorf("keysLocation %s: %v %v", jc.GetKeysLocation(), err, jwks)
	}
	var disc struct {
		Issuer string `json:"issuer"`
		JWKS   string `json:"jwks_uri"`
	}
	if err := getJSON(jc.GetIssuer()+"/.well-known/openid-configuration", &disc); err != nil || disc.Issuer != jc.GetIssuer() || disc.JWKS != jc.GetKeysLocation() {
		t.Errorf("discovery %+v (%v), jwtConfig %v", disc, err, jc)
	}

	sh, err := host.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	so, err := other.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	defer so.Close()
	has := func(want ...string) func([]*mgmtpb.SyncResponse) bool {
		return func(msgs []*mgmtpb.SyncResponse) bool {
			var nm *mgmtpb.NetworkMap
			for _, m := range msgs {
				if m.GetNetworkMap() != nil {
					nm = m.GetNetworkMap()
				}
			}
			return nm.GetPeerConfig().GetSshConfig().GetJwtConfig() != nil && slices.Equal(hashes(nm.GetSshAuth()), want)
		}
	}
	if err := sh.WaitFor(5*time.Second, has(userHash(ownerID))); err != nil {
		t.Fatalf("map: %v\n%v\n%v", err, sh.LatestMap().GetPeerConfig(), sh.LatestMap().GetSshAuth())
	}
	if mu := sh.LatestMap().GetSshAuth().GetMachineUsers(); len(mu) != 1 || !slices.Equal(mu["*"].GetIndexes(), []uint32{0}) || sh.LatestMap().GetSshAuth().GetUserIDClaim() != "sub" {
		t.Errorf("sshAuth %v", sh.LatestMap().GetSshAuth())
	}
	if nm := so.LatestMap(); nm.GetPeerConfig().GetSshConfig().GetJwtConfig() != nil || nm.GetSshAuth() != nil {
		t.Errorf("peer without SSH got jwtConfig/sshAuth: %v / %v", nm.GetPeerConfig(), nm.GetSshAuth())
	}

	// A second user joins (accepts an invitation): the host gets a whole
	// map with both users at once (though it takes deltas), with no other
	// change of the account.
	inv := obj(owner.call("POST", "/api/users/invites", map[string]any{"email": "dev@example.com", "name": "Dev", "role": "user", "auto_groups": []string{}}, 200))
	anon.call("POST", "/api/users/invites/"+inv["invite_token"].(string)+"/accept", map[string]string{"password": "Str0ng!pass"}, 200)
	var devID string
	for _, u := range list(owner.call("GET", "/api/users", nil, 200)) {
		if obj(u)["email"] == "dev@example.com" {
			devID = obj(u)["id"].(string)
		}
	}
	want := []string{userHash(ownerID), userHash(devID)}
	slices.Sort(want)
	if err := sh.WaitFor(5*time.Second, has(want...)); err != nil {
		t.Fatalf("after a user joined: %v\n%v", err, sh.LatestMap().GetSshAuth())
	}
	// Blocked: out of the list again.
	owner.call("PUT", "/api/users/"+devID, map[string]any{"role": "user", "auto_groups": []string{}, "is_blocked": true}, 200)
	if err := sh.WaitFor(5*time.Second, has(userHash(ownerID))); err != nil {
		t.Fatalf("after the user was blocked: %v\n%v", err, sh.LatestMap().GetSshAuth())
	}
}

// TestSSHJWTWithoutIdP: no identity provider, no jwtConfig (our agents
// authorize by their peers' keys; NetBird's need --disable-ssh-auth).
func TestSSHJWTWithoutIdP(t *testing.T) {
	e := start(t, t.TempDir(), turncreds.Issuer{})
	_, secret := e.setupKey(setupkey.Options{Reusable: true})
	p := testpeer.New(e.conn, "host")
	if _, err := p.Login(ctx(t), secret); err != nil {
		t.Fatal(err)
	}
	acc, err := tenant.Default(context.Background(), e.srv.Store, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Store.Tx(context.Background(), func(tx *store.Tx) error {
		at := tx.In(acc.ID)
		ps, err := at.Peers(context.Background())
		if err != nil {
			return err
		}
		for _, p := range ps {
			p.SSHEnabled = true
			if err := at.UpdatePeerName(context.Background(), p); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	lr, err := p.Login(ctx(t), secret)
	if err != nil {
		t.Fatal(err)
	}
	if !lr.GetPeerConfig().GetSshConfig().GetSshEnabled() || lr.GetPeerConfig().GetSshConfig().GetJwtConfig() != nil {
		t.Fatalf("peer config %v", lr.GetPeerConfig())
	}
	s, err := p.Sync(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if nm := s.LatestMap(); nm.GetSshAuth() != nil || nm.GetPeerConfig().GetSshConfig().GetJwtConfig() != nil {
		t.Fatalf("map %v %v", nm.GetPeerConfig(), nm.GetSshAuth())
	}
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

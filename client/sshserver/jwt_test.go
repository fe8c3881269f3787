package sshserver_test

import (
	"bufio"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/crypto/ssh"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/sshserver"
)

const (
	testIssuer = "https://idp.example/oauth2"
	testAud    = "netbird-client"
)

var testNow = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

type idp struct {
	key  *rsa.PrivateKey
	keys oidc.KeySet
}

func newIdP(t testing.TB) idp {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return idp{key: k, keys: &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{k.Public()}}}
}

// token signs claims; the defaults are a valid token for user-1 issued a
// minute before testNow.
func (p idp) token(t testing.TB, edit func(map[string]any)) string {
	t.Helper()
	c := map[string]any{"iss": testIssuer, "aud": []string{testAud}, "sub": "user-1", "email": "one@example.com",
		"iat": testNow.Add(-time.Minute).Unix(), "exp": testNow.Add(time.Hour).Unix()}
	if edit != nil {
		edit(c)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: p.key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func verifier(t testing.TB, keys oidc.KeySet, maxAge time.Duration) *sshserver.JWTVerifier {
	t.Helper()
	v, err := sshserver.NewJWTVerifier(sshserver.JWTConfig{Issuer: testIssuer, Audiences: []string{"dashboard", testAud}, MaxTokenAge: maxAge},
		keys, nil, func() time.Time { return testNow })
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// users lists user-1 for every local user and user-2 for "alice" only.
func users() *sshserver.Users {
	return &sshserver.Users{
		Hashes:  []sshserver.UserHash{sshserver.HashUserID("user-1"), sshserver.HashUserID("user-2")},
		Machine: map[string][]uint32{sshserver.Wildcard: {0}, "alice": {1}},
	}
}

func TestJWTVerify(t *testing.T) {
	p := newIdP(t)
	other := newIdP(t)
	v := verifier(t, p.keys, 0)
	cases := []struct {
		name    string
		tok     string
		claim   string
		wantID  string
		wantErr string
	}{
		{name: "valid", tok: p.token(t, nil), wantID: "user-1"},
		{name: "second audience", tok: p.token(t, func(c map[string]any) { c["aud"] = "dashboard" }), wantID: "user-1"},
		{name: "email claim", tok: p.token(t, nil), claim: "email", wantID: "one@example.com"},
		{name: "wrong issuer", tok: p.token(t, func(c map[string]any) { c["iss"] = "https://evil.example" }), wantErr: "issued by a different provider"},
		{name: "wrong audience", tok: p.token(t, func(c map[string]any) { c["aud"] = "someone-else" }), wantErr: "audience"},
		{name: "expired", tok: p.token(t, func(c map[string]any) { c["exp"] = testNow.Add(-time.Second).Unix() }), wantErr: "expired"},
		{name: "too old", tok: p.token(t, func(c map[string]any) { c["iat"] = testNow.Add(-11 * time.Minute).Unix() }), wantErr: "more than the 10m0s"},
		{name: "no iat", tok: p.token(t, func(c map[string]any) { delete(c, "iat") }), wantErr: "no iat"},
		{name: "no user claim", tok: p.token(t, func(c map[string]any) { delete(c, "sub") }), claim: "sub", wantErr: `no user ID in claim "sub"`},
		{name: "other key", tok: other.token(t, nil), wantErr: "signature"},
		{name: "garbage", tok: "not.a.jwt", wantErr: "malformed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.Verify(context.Background(), tc.tok, tc.claim)
			if tc.wantErr == "" {
				if err != nil || id != tc.wantID {
					t.Fatalf("got %q, %v; want %q", id, err, tc.wantID)
				}
				return
			}
			if !errors.Is(err, sshserver.ErrTokenRefused) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %q, %v; want ErrTokenRefused with %q", id, err, tc.wantErr)
			}
		})
	}
}

func TestJWTMaxTokenAge(t *testing.T) {
	p := newIdP(t)
	v := verifier(t, p.keys, 30*time.Second)
	if _, err := v.Verify(context.Background(), p.token(t, nil), ""); !errors.Is(err, sshserver.ErrTokenRefused) {
		t.Fatalf("a token a minute old with maxTokenAge 30s: %v, want refused", err)
	}
}

func TestNewJWTVerifierConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  sshserver.JWTConfig
		want string
	}{
		{sshserver.JWTConfig{Audiences: []string{"a"}, KeysLocation: "http://x/keys"}, "no issuer"},
		{sshserver.JWTConfig{Issuer: "http://x", KeysLocation: "http://x/keys"}, "no audience"},
		{sshserver.JWTConfig{Issuer: "http://x", Audiences: []string{"a"}}, "no keysLocation"},
	} {
		if _, err := sshserver.NewJWTVerifier(tc.cfg, nil, nil, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

func TestHashUserID(t *testing.T) {
	// BLAKE2b with a 16-byte digest, as management hashes sshAuth's users
	// (the vector from Python's hashlib.blake2b(digest_size=16)).
	got := sshserver.HashUserID("user@example.com")
	if want := "a5060c048fc2219ff10f83c61bf65c81"; hex.EncodeToString(got[:]) != want {
		t.Fatalf("hash %x, want %s", got, want)
	}
}

// TestTokenLogin: NetBird's client logs in over SSH with the token as
// the password; the version line carries the JWT marker; unknown users,
// bad tokens, peers outside the map or policy are refused; a map that
// drops the user closes the connection.
func TestTokenLogin(t *testing.T) {
	p := newIdP(t)
	r := newRig(t)
	v, err := sshserver.NewJWTVerifier(sshserver.JWTConfig{Issuer: testIssuer, Audiences: []string{testAud}}, p.keys, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok := func(sub string) string {
		return p.token(t, func(c map[string]any) {
			c["sub"], c["iat"], c["exp"] = sub, now.Unix(), now.Add(time.Hour).Unix()
		})
	}
	access := func(policy bool, u *sshserver.Users) *sshserver.Access {
		// The client peer has no SSH key in the map: only a token gets it in.
		a := &sshserver.Access{Peers: []sshserver.Peer{{Name: "o.mesh", IP: r.local}}, JWT: &sshserver.JWTAuth{Verifier: v, Users: u}}
		if policy {
			a.Rules = []acl.Rule{{Peer: r.local, Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: 22, PortHi: 22}}
		}
		return a
	}
	all := &sshserver.Users{Hashes: []sshserver.UserHash{sshserver.HashUserID("user-1")}, Machine: map[string][]uint32{sshserver.Wildcard: {0}}}
	r.srv.SetAccess(access(true, all))
	dial := func(password string) (*ssh.Client, error) {
		return ssh.Dial("tcp", r.addr, &ssh.ClientConfig{User: r.user, Auth: []ssh.AuthMethod{ssh.Password(password)},
			HostKeyCallback: ssh.FixedHostKey(r.host.PublicKey()), Timeout: 5 * time.Second})
	}
	c, err := dial(tok("user-1"))
	if err != nil {
		t.Fatalf("token login: %v", err)
	}
	if v := string(c.ServerVersion()); !strings.Contains(v, "NetBird-SSH-Server") || !strings.HasSuffix(v, " NetBird-JWT-Required") {
		t.Errorf("server version %q lacks NetBird's JWT marker", v)
	}
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Output("echo token-ok")
	if err != nil || strings.TrimSpace(string(out)) != "token-ok" {
		t.Fatalf("command: %v %q", err, out)
	}
	// A map without the user ends the connection.
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	r.srv.SetAccess(access(true, &sshserver.Users{Hashes: []sshserver.UserHash{sshserver.HashUserID("user-9")}, Machine: map[string][]uint32{sshserver.Wildcard: {0}}}))
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Error("connection of a user the map dropped still open")
	}
	c.Close()

	for _, tc := range []struct {
		name   string
		access *sshserver.Access
		pass   string
	}{
		{"unknown user", access(true, all), tok("user-2")},
		{"bad token", access(true, all), "x.y.z"},
		{"no policy", access(false, all), tok("user-1")},
		{"no users", access(true, nil), tok("user-1")},
		{"user not mapped to this local user", access(true, &sshserver.Users{Hashes: []sshserver.UserHash{sshserver.HashUserID("user-1")}, Machine: map[string][]uint32{"someone-else": {0}}}), tok("user-1")},
		{"not a map peer", &sshserver.Access{Peers: []sshserver.Peer{{Name: "x", IP: netip.MustParseAddr("100.64.0.9")}}, AllowAll: true, JWT: access(true, all).JWT}, tok("user-1")},
		{"no jwtConfig", &sshserver.Access{Peers: []sshserver.Peer{{Name: "o.mesh", IP: r.local}}, AllowAll: true}, tok("user-1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.srv.SetAccess(tc.access)
			if c, err := dial(tc.pass); err == nil {
				c.Close()
				t.Fatal("logged in")
			}
		})
	}
	// Without a JWT check (no jwtConfig, or netbird up --disable-ssh-auth)
	// the version line does not carry the marker, so NetBird's clients
	// log in with their keys instead of asking for a token.
	r.srv.SetAccess(&sshserver.Access{Peers: []sshserver.Peer{{Name: "o.mesh", IP: r.local}}, AllowAll: true})
	nc, err := net.DialTimeout("tcp", r.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(line, "NetBird-JWT-Required") {
		t.Errorf("version line %q without a JWT check carries the JWT marker", line)
	}
}

// TestUsersAllow: sshAuth's machine users decide the local user.
func TestUsersAllow(t *testing.T) {
	u := users()
	for _, tc := range []struct {
		id, local string
		ok        bool
	}{
		{"user-1", "bob", true},
		{"user-2", "alice", true},
		{"user-2", "bob", false},
		{"user-3", "alice", false},
	} {
		err := sshserver.UsersAllow(u, tc.id, tc.local)
		if (err == nil) != tc.ok {
			t.Errorf("%s as %s: %v, want ok=%v", tc.id, tc.local, err, tc.ok)
		}
		if err != nil && !errors.Is(err, sshserver.ErrUserNotListed) {
			t.Errorf("%s as %s: %v, want ErrUserNotListed", tc.id, tc.local, err)
		}
	}
	if err := sshserver.UsersAllow(nil, "user-1", "bob"); !errors.Is(err, sshserver.ErrUserNotListed) {
		t.Errorf("no sshAuth: %v, want ErrUserNotListed", err)
	}
}

package idp_test

import (
	"context"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/wiremesh/wiremesh/internal/testoidc"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/idp"
	"github.com/wiremesh/wiremesh/management/secretbox"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/users"
)

var idpLink = regexp.MustCompile(`<a class="idp" href="([^"]+)">Log in with ([^<]+)</a>`)

// upstreamBrowser is a browser with a cookie jar that stops at the
// dashboard and remembers the upstream callbacks it passed.
type upstreamBrowser struct {
	c         *http.Client
	final     *url.URL
	callbacks []string
}

func newBrowser() *upstreamBrowser {
	b := &upstreamBrowser{}
	jar, _ := cookiejar.New(nil)
	b.c = &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasSuffix(req.URL.Path, "/upstream/callback") {
			b.callbacks = append(b.callbacks, req.URL.String())
		}
		if req.URL.Host == "dashboard.test" {
			b.final = req.URL
			return http.ErrUseLastResponse
		}
		return nil
	}}
	return b
}

func (b *upstreamBrowser) get(t *testing.T, u string) (*http.Response, string) {
	t.Helper()
	resp, err := b.c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// upstreamLogin logs in at the built-in provider with the upstream
// provider named name, through real HTTP: the login page's button, the
// upstream's login form, the redirects back; it returns the built-in
// provider's tokens.
func (r *rig) upstreamLogin(t *testing.T, b *upstreamBrowser, name, email, password string) (*oauth2.Token, error) {
	t.Helper()
	conf := r.oauth("openid", "profile", "email", "offline_access")
	verifier := oauth2.GenerateVerifier()
	resp, body := b.get(t, conf.AuthCodeURL("st8", oauth2.S256ChallengeOption(verifier)))
	var start string
	for _, m := range idpLink.FindAllStringSubmatch(body, -1) {
		if html.UnescapeString(m[2]) == name {
			start = html.UnescapeString(m[1])
		}
	}
	if resp.StatusCode != http.StatusOK || start == "" {
		t.Fatalf("login page has no button for %q: %s\n%s", name, resp.Status, body)
	}
	resp, body = b.get(t, r.url+start)
	up := resp.Request.URL // the upstream's login page
	if resp.StatusCode != http.StatusOK || up.Query().Get("authRequestID") == "" {
		t.Fatalf("upstream login page: %s %s\n%s", resp.Status, up, body)
	}
	post := *up
	post.RawQuery = ""
	resp, err := b.c.PostForm(post.String(), url.Values{"authRequestID": {up.Query().Get("authRequestID")}, "email": {email}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	body2, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if b.final == nil {
		return nil, errors.New(resp.Status + ": " + string(body2))
	}
	back := b.final
	b.final = nil
	if back.Query().Get("state") != "st8" {
		t.Fatalf("returned to the dashboard with %s", back)
	}
	return conf.Exchange(context.Background(), back.Query().Get("code"), oauth2.VerifierOption(verifier))
}

// TestUpstreamLogin: an admin adds a second OpenID Connect provider (run
// in-process on loopback) to the built-in one; its users log in through
// the login page's button and get the built-in provider's tokens: a new
// user for an unknown person once an admin approved it, the invited user
// for an invited address; one user per upstream subject. The owner's
// address is refused.
func TestUpstreamLogin(t *testing.T) {
	r := newRig(t, allowLoopback)
	ctx := context.Background()
	up := testoidc.StartWithRedirects(t, "", []string{r.url + "/oauth2/upstream/callback"},
		testoidc.User{Subject: "u-dana", Email: "dana@corp.example", Name: "Dana", Password: "Dana-passw0rd!"},
		testoidc.User{Subject: "u-erin", Email: "erin@corp.example", Name: "Erin", Password: "Erin-passw0rd!"},
		testoidc.User{Subject: "u-owner", Email: "owner@example.com", Name: "Owner Upstream", Password: "Owner-upstream1!"})
	ps := idp.Providers{Store: r.st}
	ps0, err := ps.Create(ctx, r.owner, idp.ProviderInput{Type: "oidc", Name: "Corp <SSO>", Issuer: up.URL, ClientID: testoidc.ClientID})
	if err != nil {
		t.Fatal(err)
	}

	// An unknown person's first login makes a user pending approval (the
	// account does not require approval, a provider's people still wait).
	if _, err := r.upstreamLogin(t, newBrowser(), "Corp <SSO>", "dana@corp.example", "Dana-passw0rd!"); err == nil ||
		!strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "pending approval") {
		t.Fatalf("unknown person's first upstream login: %v, want pending approval", err)
	}
	var pending account.User
	err = r.st.Read(ctx, func(tx *store.Tx) error {
		var err error
		pending, err = tx.In(r.owner.AccountID).UserByEmail(ctx, "dana@corp.example")
		return err
	})
	if err != nil || !pending.PendingApproval || pending.Role != account.RoleUser {
		t.Fatalf("user of the first upstream login: %+v %v", pending, err)
	}
	if _, err := r.us.Approve(ctx, r.owner, pending.ID); err != nil {
		t.Fatal(err)
	}

	b := newBrowser()
	tok, err := r.upstreamLogin(t, b, "Corp <SSO>", "dana@corp.example", "Dana-passw0rd!")
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.verify(tok.AccessToken)
	if err != nil || c.Email != "dana@corp.example" || tok.RefreshToken == "" {
		t.Fatalf("built-in token of an upstream user: %+v %v (refresh %q)", c, err, tok.RefreshToken)
	}
	dana, err := r.us.Get(ctx, r.owner, account.UserID(c.Subject))
	if err != nil || dana.Role != account.RoleUser || dana.Name != "Dana" || !dana.EmailVerified {
		t.Fatalf("user created for the upstream login: %+v %v", dana, err)
	}
	// Its refresh token works like a password login's.
	r.mustRefresh(tok.RefreshToken)

	// The callback is single use: replayed, it is refused.
	if len(b.callbacks) != 1 {
		t.Fatalf("callbacks %v", b.callbacks)
	}
	if resp, _ := b.get(t, b.callbacks[0]); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("replayed upstream callback: %s", resp.Status)
	}
	// A callback with a state this provider never issued.
	if resp, _ := newBrowser().get(t, r.url+"/oauth2/upstream/callback?state=forged&code=x"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("forged state: %s", resp.Status)
	}

	// Again: the same user, not a second one.
	tok, err = r.upstreamLogin(t, newBrowser(), "Corp <SSO>", "dana@corp.example", "Dana-passw0rd!")
	if err != nil {
		t.Fatal(err)
	}
	if c2, _ := r.verify(tok.AccessToken); c2.Subject != c.Subject {
		t.Fatalf("second login is %s, first %s", c2.Subject, c.Subject)
	}

	// An invited address becomes the invited user, with the invite's role.
	if _, _, err := r.us.CreateInvite(ctx, r.owner, users.InviteInput{Email: "Erin@corp.example", Name: "Erin", Role: account.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	tok, err = r.upstreamLogin(t, newBrowser(), "Corp <SSO>", "erin@corp.example", "Erin-passw0rd!")
	if err != nil {
		t.Fatal(err)
	}
	ce, _ := r.verify(tok.AccessToken)
	erin, err := r.us.Get(ctx, r.owner, account.UserID(ce.Subject))
	if err != nil || erin.Role != account.RoleAdmin {
		t.Fatalf("invited user after an upstream login: %+v %v", erin, err)
	}
	if inv, _ := r.us.Invites(ctx, r.owner); len(inv) != 0 {
		t.Fatalf("invitation left after it was used: %v", inv)
	}

	// The owner's verified address, from a provider an admin added, is
	// refused: the owner logs in with its password (and second factor).
	if _, err := r.upstreamLogin(t, newBrowser(), "Corp <SSO>", "owner@example.com", "Owner-upstream1!"); err == nil ||
		!strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "log in with its password") {
		t.Fatalf("upstream login with the owner's address: %v, want refused", err)
	}
	err = r.st.Read(ctx, func(tx *store.Tx) error { _, err := tx.IdPLink(ctx, ps0.ID, "u-owner"); return err })
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("link stored for the refused owner login: %v", err)
	}

	// Blocked, the upstream user cannot log in.
	if _, err := r.us.Update(ctx, r.owner, dana.ID, users.UpdateInput{Role: account.RoleUser, Blocked: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.upstreamLogin(t, newBrowser(), "Corp <SSO>", "dana@corp.example", "Dana-passw0rd!"); err == nil || !strings.Contains(err.Error(), "blocked") {
		t.Fatalf("blocked upstream user: %v", err)
	}
}

// TestJoinUpstreamUnverified: an address the upstream provider did not
// verify claims neither an existing user nor an invitation, and nothing is
// stored; it may still become a new user, pending approval.
func TestJoinUpstreamUnverified(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	ps := idp.Providers{Store: r.st, Secrets: testBox(t, 1)}
	p, err := ps.Create(ctx, r.owner, idp.ProviderInput{Type: "google", Name: "G", Issuer: "https://accounts.google.com", ClientID: "c", ClientSecret: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.us.CreateInvite(ctx, r.owner, users.InviteInput{Email: "inv@example.com", Name: "I", Role: account.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	for _, email := range []string{"owner@example.com", "inv@example.com"} {
		_, err := r.us.JoinUpstream(ctx, r.owner.AccountID, users.UpstreamLogin{ProviderID: p.ID, Subject: "s-" + email, Email: email})
		if !errors.Is(err, users.ErrForbidden) {
			t.Fatalf("unverified %s: %v", email, err)
		}
		err = r.st.Read(ctx, func(tx *store.Tx) error { _, err := tx.IdPLink(ctx, p.ID, "s-"+email); return err })
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("link stored for a refused login: %v", err)
		}
	}
	if _, err := r.us.JoinUpstream(ctx, r.owner.AccountID, users.UpstreamLogin{ProviderID: p.ID, Subject: "s-new", Email: "new@example.com"}); !errors.Is(err, users.ErrPendingApproval) {
		t.Fatalf("new user with an unverified address: %v, want ErrPendingApproval", err)
	}
	err = r.st.Read(ctx, func(tx *store.Tx) error {
		u, err := tx.In(r.owner.AccountID).UserByEmail(ctx, "new@example.com")
		if err == nil && (u.EmailVerified || u.Role != account.RoleUser || !u.PendingApproval) {
			t.Errorf("new user with an unverified address: %+v", u)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.us.JoinUpstream(ctx, r.owner.AccountID, users.UpstreamLogin{ProviderID: p.ID, Subject: "s-none"}); !errors.Is(err, users.ErrInvalid) {
		t.Fatalf("login without an e-mail address: %v", err)
	}
}

// allowLoopback lets the built-in provider reach an upstream provider run
// in-process on loopback, which its client refuses by default.
func allowLoopback(o *idp.Options) {
	o.UpstreamAllow = idp.UpstreamAllow{CIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
}

// TestUpstreamOnLoopbackRefused: by default the built-in provider does not
// connect to an upstream issuer on loopback (an admin could otherwise make
// the server fetch internal URLs): the login button answers 502 and the
// upstream is never asked; an allowed host name lets it through.
func TestUpstreamOnLoopbackRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  func(*idp.Options)
		want int
	}{
		{"default", func(*idp.Options) {}, http.StatusBadGateway},
		{"allowed host", func(o *idp.Options) { o.UpstreamAllow = idp.UpstreamAllow{Hosts: []string{"127.0.0.1"}} }, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, c.opt)
			up := testoidc.StartWithRedirects(t, "", []string{r.url + "/oauth2/upstream/callback"})
			if _, err := (idp.Providers{Store: r.st}).Create(context.Background(), r.owner,
				idp.ProviderInput{Type: "oidc", Name: "Corp", Issuer: up.URL, ClientID: testoidc.ClientID}); err != nil {
				t.Fatal(err)
			}
			b := newBrowser()
			conf := r.oauth("openid")
			_, body := b.get(t, conf.AuthCodeURL("st8", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
			m := idpLink.FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("no upstream button:\n%s", body)
			}
			resp, body := b.get(t, r.url+html.UnescapeString(m[1]))
			if resp.StatusCode != c.want {
				t.Fatalf("upstream login start: %s, want %d\n%s", resp.Status, c.want, body)
			}
		})
	}
}

func testBox(t *testing.T, seed byte) *secretbox.Box {
	t.Helper()
	key := make([]byte, 32)
	key[0] = seed
	b, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestClientSecretSealed: a client secret is stored sealed, bound to its
// provider; the login opens it with the same key; the login page's list
// carries none; another key, or no key, cannot open it; without a key no
// secret is stored at all.
func TestClientSecretSealed(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	box := testBox(t, 1)
	p, err := (idp.Providers{Store: r.st, Secrets: box}).Create(ctx, r.owner,
		idp.ProviderInput{Type: "oidc", Name: "Corp", Issuer: "https://sso.example.com", ClientID: "c", ClientSecret: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if !secretbox.Sealed(p.ClientSecret) || strings.Contains(p.ClientSecret, "s3cret") {
		t.Fatalf("stored %q", p.ClientSecret)
	}
	up, err := (idp.Upstreams{Store: r.st, Secrets: box}).Upstream(ctx, p.ID)
	if err != nil || up.ClientSecret != "s3cret" {
		t.Fatalf("login's provider: %+v %v", up, err)
	}
	list, err := (idp.Upstreams{Store: r.st, Secrets: box}).Upstreams(ctx)
	if err != nil || len(list) != 1 || list[0].ClientSecret != "" {
		t.Fatalf("login page list: %+v %v", list, err)
	}
	for name, u := range map[string]idp.Upstreams{"another key": {Store: r.st, Secrets: testBox(t, 2)}, "no key": {Store: r.st}} {
		if _, err := u.Upstream(ctx, p.ID); err == nil {
			t.Errorf("%s opened the secret", name)
		}
	}
	// Update: a new secret is sealed again; none keeps the stored one.
	if _, err := (idp.Providers{Store: r.st, Secrets: box}).Update(ctx, r.owner, p.ID,
		idp.ProviderInput{Type: "oidc", Name: "Corp", Issuer: "https://sso.example.com", ClientID: "c", ClientSecret: "n3w"}); err != nil {
		t.Fatal(err)
	}
	if up, err := (idp.Upstreams{Store: r.st, Secrets: box}).Upstream(ctx, p.ID); err != nil || up.ClientSecret != "n3w" {
		t.Fatalf("after update: %+v %v", up, err)
	}
	if _, err := (idp.Providers{Store: r.st}).Create(ctx, r.owner,
		idp.ProviderInput{Type: "oidc", Name: "Plain", Issuer: "https://sso2.example.com", ClientID: "c", ClientSecret: "x"}); err == nil {
		t.Fatal("a secret was stored without a key to seal it")
	}
}

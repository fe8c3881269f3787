package idp_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
	"golang.org/x/oauth2"

	"github.com/wiremesh/wiremesh/internal/testoidc"
	"github.com/wiremesh/wiremesh/management/idp"
)

var (
	secretRe   = regexp.MustCompile(`<code id="secret">([A-Z2-7]+)</code>`)
	recoveryRe = regexp.MustCompile(`<code class="recovery">([a-z2-7-]+)</code>`)
	continueRe = regexp.MustCompile(`<a id="continue" href="([^"]+)">`)
	qrRe       = regexp.MustCompile(`<img alt="QR code" width="200" height="200" src="data:image/png;base64,[A-Za-z0-9+/=&#;]{100,}">`)
)

// mfaBrowser logs in with a password and a second factor through the
// provider's pages.
type mfaBrowser struct {
	t     *testing.T
	r     *rig
	c     *http.Client
	final *url.URL
}

func (r *rig) mfaBrowser(t *testing.T) *mfaBrowser {
	b := &mfaBrowser{t: t, r: r}
	jar, _ := cookiejar.New(nil)
	b.c = &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Host == "dashboard.test" {
			b.final = req.URL
			return http.ErrUseLastResponse
		}
		return nil
	}}
	return b
}

func (b *mfaBrowser) do(req func() (*http.Response, error)) (int, string) {
	b.t.Helper()
	resp, err := req()
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// password starts a login and posts the password: it returns the request
// ID and the page that follows.
func (b *mfaBrowser) password(email, pw string) (string, int, string) {
	b.t.Helper()
	b.final = nil
	conf := b.r.oauth("openid", "email")
	resp, err := b.c.Get(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Request.URL.Query().Get("authRequestID")
	if id == "" {
		b.t.Fatalf("no login page: %s", resp.Request.URL)
	}
	code, body := b.do(func() (*http.Response, error) {
		return b.c.PostForm(b.r.url+"/oauth2/login", url.Values{"authRequestID": {id}, "email": {email}, "password": {pw}})
	})
	return id, code, body
}

func (b *mfaBrowser) code(id, otp string, enrol bool) (int, string) {
	b.t.Helper()
	f := url.Values{"authRequestID": {id}, "otp": {otp}}
	if enrol {
		f.Set("enrol", "1")
	}
	return b.do(func() (*http.Response, error) { return b.c.PostForm(b.r.url+"/oauth2/login/mfa", f) })
}

// TestTOTP: an account requiring a second factor makes the next password
// login set one up (QR code, key, a code from it, recovery codes shown
// once); later logins need a code (each accepted once) or a recovery code
// (each used once); a wrong code does not log in; device approval asks for
// the code too. Without the requirement nothing changes.
func TestTOTP(t *testing.T) {
	var mu sync.Mutex
	required := map[string]bool{}
	r := newRig(t, func(o *idp.Options) {
		o.MFARequired = func(_ context.Context, subject string) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return required[subject], nil
		}
	})
	u, pw := r.person("mfa@example.com")
	b := r.mfaBrowser(t)

	// Not required, not set up: the password is enough.
	if _, code, _ := b.password(u.Email, pw); code != http.StatusFound || b.final == nil {
		t.Fatalf("password login without a second factor: %d %v", code, b.final)
	}

	mu.Lock()
	required[string(u.ID)] = true
	mu.Unlock()
	id, code, page := b.password(u.Email, pw)
	m := secretRe.FindStringSubmatch(page)
	if code != http.StatusOK || b.final != nil || m == nil || !qrRe.MatchString(page) {
		t.Fatalf("enrolment page: %d %v\n%s", code, b.final, page)
	}
	secret := m[1]
	if code, _ := b.code(id, "000000", true); code != http.StatusUnauthorized || b.final != nil {
		t.Fatalf("wrong enrolment code: %d", code)
	}
	// Start again: a new key replaces the unconfirmed one.
	id, _, page = b.password(u.Email, pw)
	secret = secretRe.FindStringSubmatch(page)[1]
	now := r.clk.Now()
	otp, _ := totp.GenerateCode(secret, now)
	code, page = b.code(id, otp, true)
	recovery := recoveryRe.FindAllStringSubmatch(page, -1)
	cont := continueRe.FindStringSubmatch(page)
	if code != http.StatusOK || len(recovery) != 10 || cont == nil {
		t.Fatalf("enrolment confirmed: %d\n%s", code, page)
	}
	b.do(func() (*http.Response, error) { return b.c.Get(html.UnescapeString(cont[1])) })
	if b.final == nil || b.final.Query().Get("code") == "" {
		t.Fatalf("enrolment did not finish the login: %v", b.final)
	}

	// Next login: the password alone leads to the code page.
	id, code, page = b.password(u.Email, pw)
	if code != http.StatusOK || b.final != nil || !strings.Contains(page, `name="otp"`) || strings.Contains(page, "QR code") {
		t.Fatalf("code page: %d %v\n%s", code, b.final, page)
	}
	// The code used to enrol is not accepted again (same step).
	if code, _ := b.code(id, otp, false); code != http.StatusUnauthorized {
		t.Fatalf("replayed code: %d", code)
	}
	r.clk.Add(30 * time.Second)
	otp2, _ := totp.GenerateCode(secret, r.clk.Now())
	if code, _ := b.code(id, otp2, false); code != http.StatusFound && b.final == nil {
		t.Fatalf("right code: %d", code)
	}
	if b.final == nil {
		t.Fatal("right code did not finish the login")
	}
	// A recovery code works once, typed in capitals without the dash.
	rc := strings.ToUpper(strings.ReplaceAll(recovery[0][1], "-", ""))
	id, _, _ = b.password(u.Email, pw)
	b.code(id, rc, false)
	if b.final == nil {
		t.Fatal("recovery code did not log in")
	}
	id, _, _ = b.password(u.Email, pw)
	if code, _ := b.code(id, rc, false); code != http.StatusUnauthorized || b.final != nil {
		t.Fatalf("used recovery code: %d", code)
	}
	// The code page cannot be used without the password step.
	conf := r.oauth("openid")
	resp, _ := b.c.Get(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	resp.Body.Close()
	fresh := resp.Request.URL.Query().Get("authRequestID")
	r.clk.Add(30 * time.Second)
	otp3, _ := totp.GenerateCode(secret, r.clk.Now())
	if code, _ := b.code(fresh, otp3, false); code != http.StatusNotFound {
		t.Fatalf("code without a password: %d", code)
	}
	// A second enrolment cannot replace the factor.
	if _, err := (idp.TOTP{Store: r.st}).Enrol(context.Background(), string(u.ID), u.Email); err == nil {
		t.Fatal("enrolment over a confirmed factor")
	}

	// Device approval asks for the code as well.
	ep := r.p.Endpoints()
	_, dev := r.post(ep.DeviceAuthorization, url.Values{"client_id": {idp.AgentClientID}, "scope": {"openid"}})
	verify, userCode := dev["verification_uri"].(string), dev["user_code"].(string)
	if err := testoidc.ApproveDevice(nil, verify, userCode, u.Email, pw); err == nil {
		t.Fatal("device approved without the second factor")
	}
	code, page = b.do(func() (*http.Response, error) {
		return http.PostForm(verify, url.Values{"user_code": {userCode}, "email": {u.Email}, "password": {pw}, "otp": {otp3}})
	})
	if code != http.StatusOK || !strings.Contains(page, "Device approved") {
		t.Fatalf("device approval with the code: %d\n%s", code, page)
	}
}

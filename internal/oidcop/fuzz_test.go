package oidcop

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// plainDir knows one user with a plain password (fuzzing has no time for
// bcrypt).
type plainDir struct{}

func (plainDir) Authenticate(_ context.Context, email, password string) (Identity, error) {
	if email == "a@example.com" && password == "right" {
		return Identity{Subject: "a", Email: email}, nil
	}
	return Identity{}, ErrBadCredentials
}

func (plainDir) Lookup(_ context.Context, subject string) (Identity, error) {
	return Identity{Subject: subject, Email: "a@example.com"}, nil
}

var fuzzLimits = Limits{MaxPending: 40, MaxPendingPerSource: 8, MaxPendingBytes: 64 << 10, MaxPendingBytesPerSource: 16 << 10}

func fuzzProvider(t testing.TB) *Provider {
	p, err := New(Options{Issuer: "http://idp.test/oauth2", Directory: plainDir{}, Key: testKey(), Limits: fuzzLimits,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
		Clients:        []ClientConfig{{ID: clientID, Native: true, RedirectURIs: []string{"http://127.0.0.1/cb"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkBounds fails when the provider holds more than its limits allow.
func checkBounds(t *testing.T, st *storage) {
	t.Helper()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.count > st.limits.MaxPending || st.bytes > st.limits.MaxPendingBytes ||
		st.count != len(st.requests)+len(st.devices) || len(st.codes) > len(st.requests) || len(st.userCodes) != len(st.devices) {
		t.Fatalf("state past its bounds: count %d bytes %d requests %d devices %d codes %d user codes %d",
			st.count, st.bytes, len(st.requests), len(st.devices), len(st.codes), len(st.userCodes))
	}
	for src, u := range st.bySource {
		if u.count > st.limits.MaxPendingPerSource || u.bytes > st.limits.MaxPendingBytesPerSource {
			t.Fatalf("source %v holds %+v, past its bounds", src, *u)
		}
	}
}

var fuzzPaths = []string{loginPath, devicePath, "/authorize", "/device_authorization", "/oauth/token", "/authorize/callback", "/userinfo", "/keys", "/.well-known/openid-configuration"}

// FuzzPages sends arbitrary queries and forms to the provider's pages and
// endpoints: no answer is a 5xx (but the designed 503 when every pending
// slot is taken) and the pending state never grows past its caps, however
// many requests arrive.
func FuzzPages(f *testing.F) {
	f.Add(uint8(2), false, "client_id=agent&redirect_uri=http%3A%2F%2F127.0.0.1%2Fcb&response_type=code&scope=openid&state=s&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256", "", "192.0.2.1")
	f.Add(uint8(3), true, "", "client_id=agent&scope=openid+email", "192.0.2.9, 198.51.100.3")
	f.Add(uint8(0), true, "", "authRequestID=x&email=a%40example.com&password=wrong", "")
	f.Add(uint8(1), true, "", "user_code=ABCD-EFGH&email=a%40example.com&password=right", "")
	f.Add(uint8(4), true, "", "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code&device_code=x&client_id=agent", "")
	f.Add(uint8(5), false, "id=nonexistent", "", "")
	f.Add(uint8(2), false, "state="+strings.Repeat("s", 2000), "", "")
	p := fuzzProvider(f)
	f.Fuzz(func(t *testing.T, path uint8, post bool, query, body, xff string) {
		method := http.MethodGet
		if post {
			method = http.MethodPost
		}
		req := httptest.NewRequest(method, "http://idp.test/oauth2", strings.NewReader(body))
		req.URL.Path += fuzzPaths[int(path)%len(fuzzPaths)]
		req.URL.RawQuery = query
		req.RemoteAddr = "192.0.2.1:5000"
		if post {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, req)
		// The one 5xx by design: every pending slot of the provider is
		// taken (fast fuzzing from many forwarded addresses fills them),
		// answered 503 temporarily_unavailable as TestPendingCaps expects.
		full := rec.Code == http.StatusServiceUnavailable && strings.Contains(rec.Body.String(), "temporarily_unavailable") &&
			strings.Contains(rec.Body.String(), errAllFull.Error())
		if rec.Code >= 500 && !full {
			t.Fatalf("%s %s?%.200s: %d %.300s", method, req.URL.Path, query, rec.Code, rec.Body.String())
		}
		checkBounds(t, p.st)
	})
}

// FuzzStorage creates auth requests and device codes with arbitrary
// fields straight in the storage: each is refused with an OAuth error or
// held within the caps, looked up by its ID intact, and deleting it gives
// back everything it was charged.
func FuzzStorage(f *testing.F) {
	f.Add("agent", "http://127.0.0.1/cb", "state", "nonce", "openid email", "challenge", "S256", "ABCD-EFGH", "192.0.2.1")
	f.Add("", "", "", "", "", "", "", "", "")
	f.Add(strings.Repeat("c", 200), "x", strings.Repeat("s", 1025), "", "a b c d e f g h i j k l m n o p q", "", "plain", "", "::1")
	p := fuzzProvider(f)
	st := p.st
	f.Fuzz(func(t *testing.T, client, redirect, state, nonce, scope, challenge, method, userCode, src string) {
		a, _ := netip.ParseAddr(src)
		ctx := withSource(context.Background(), a)
		r := &oidc.AuthRequest{ClientID: client, RedirectURI: redirect, State: state, Nonce: nonce, Scopes: strings.Fields(scope),
			ResponseType: oidc.ResponseTypeCode, CodeChallenge: challenge, CodeChallengeMethod: oidc.CodeChallengeMethod(method),
			LoginHint: state, IDTokenHint: nonce}
		req, err := st.CreateAuthRequest(ctx, r, "")
		if err != nil {
			if _, ok := err.(*oidc.Error); !ok {
				t.Fatalf("refusal is not an OAuth error: %v", err)
			}
		} else {
			got, err := st.AuthRequestByID(ctx, req.GetID())
			if err != nil || got.GetState() != state || got.GetNonce() != nonce || got.GetRedirectURI() != redirect {
				t.Fatalf("lookup of a held request: %v", err)
			}
			if err := st.SaveAuthCode(ctx, req.GetID(), "code-"+req.GetID()); err != nil {
				t.Fatal(err)
			}
		}
		derr := st.StoreDeviceAuthorization(ctx, client, "dc-"+userCode, userCode, time.Now().Add(time.Minute), strings.Fields(scope))
		checkBounds(t, st)
		if err == nil {
			_ = st.DeleteAuthRequest(ctx, req.GetID())
		}
		if derr == nil {
			if _, err := st.GetDeviceAuthorizatonState(ctx, client, "dc-"+userCode); err != nil {
				t.Fatalf("lookup of a held device code: %v", err)
			}
			_ = st.completeDevice(userCode, "a", false)
			_, _ = st.GetDeviceAuthorizatonState(ctx, client, "dc-"+userCode) // denied: forgotten
		}
		checkBounds(t, st)
		if pd := st.pendingNow(); pd != (Pending{}) {
			t.Fatalf("deleted entries still charged: %+v", pd)
		}
	})
}

package oidcop

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// fakeUpstreams offers one upstream provider.
type fakeUpstreams struct{ up Upstream }

func (f fakeUpstreams) Upstreams(context.Context) ([]Upstream, error) { return []Upstream{f.up}, nil }
func (f fakeUpstreams) Upstream(_ context.Context, id string) (Upstream, error) {
	if id != f.up.ID {
		return Upstream{}, errors.New("no such provider")
	}
	return f.up, nil
}
func (f fakeUpstreams) Login(context.Context, string, UpstreamIdentity) (string, error) {
	return "", errors.New("not in this test")
}

// TestUpstreamPendingCaps: pending upstream logins count against the
// same per-source and overall caps as pending logins, one per login
// request (starting again replaces it), and expire with them.
func TestUpstreamPendingCaps(t *testing.T) {
	upstream := start(t, Options{}, nil)
	h := start(t, Options{TrustedProxies: loopback, Limits: Limits{MaxPending: 6, MaxPendingPerSource: 4},
		Upstreams: fakeUpstreams{up: Upstream{ID: "corp", Name: "Corp", Issuer: upstream.base, ClientID: clientID}}}, nil)
	begin := func(id, src string) int {
		code, body, hdr := h.do(t, http.MethodGet, upstreamPath, url.Values{"authRequestID": {id}, "idp": {"corp"}}, src)
		if code == http.StatusFound && !strings.HasPrefix(hdr.Get("Location"), upstream.base+"/authorize?") {
			t.Fatalf("upstream start redirected to %q", hdr.Get("Location"))
		}
		if code == http.StatusTooManyRequests && !strings.Contains(body, "pending") {
			t.Fatalf("upstream start refused without saying why: %d %s", code, body)
		}
		return code
	}
	// The login page offers the provider.
	a := h.authorize(t, "192.0.2.1")
	if _, body, _ := h.do(t, http.MethodGet, loginPath, url.Values{"authRequestID": {a}}, "192.0.2.1"); !strings.Contains(body, "Log in with Corp") {
		t.Fatalf("login page without the upstream button:\n%s", body)
	}
	b := h.authorize(t, "192.0.2.1")
	for _, id := range []string{a, b, a, a} { // starting again replaces
		if code := begin(id, "192.0.2.1"); code != http.StatusFound {
			t.Fatalf("upstream start within the cap: %d", code)
		}
	}
	if pd := h.p.st.pendingNow(); pd.UpstreamLogins != 2 || pd.AuthRequests != 2 {
		t.Fatalf("held %+v, want 2 logins and 2 upstream logins", pd)
	}
	if code := begin(h.authorize(t, "192.0.2.2"), "192.0.2.1"); code != http.StatusTooManyRequests {
		t.Fatalf("upstream start past the source's cap: %d", code)
	}
	if code := begin("unknown", "192.0.2.3"); code != http.StatusNotFound {
		t.Fatalf("upstream start for an unknown login: %d", code)
	}
	if code, _, _ := h.do(t, http.MethodGet, upstreamPath, url.Values{"authRequestID": {a}, "idp": {strings.Repeat("x", 65)}}, "192.0.2.1"); code != http.StatusBadRequest {
		t.Fatalf("overlong idp: %d", code)
	}
	h.advance(pendingLifetime + time.Second)
	h.authorize(t, "192.0.2.1")
	if pd := h.p.st.pendingNow(); pd.UpstreamLogins != 0 {
		t.Fatalf("expired upstream logins held: %+v", pd)
	}
}

package oidcop

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

const clientID = "agent"

var testKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

// bcryptDir is a directory of bcrypt-hashed passwords that counts the
// comparisons it makes.
type bcryptDir struct {
	hashes map[string][]byte // by e-mail
	evals  atomic.Int64
}

func newDir(t testing.TB, users map[string]string) *bcryptDir {
	d := &bcryptDir{hashes: map[string][]byte{}}
	for email, pw := range users {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), 6)
		if err != nil {
			t.Fatal(err)
		}
		d.hashes[email] = h
	}
	return d
}

func (d *bcryptDir) Authenticate(_ context.Context, email, password string) (Identity, error) {
	d.evals.Add(1)
	h, ok := d.hashes[email]
	if !ok {
		h = []byte("$2a$06$invalidinvalidinvalidinvalidinvalidinvalidinvalidinva")
	}
	if bcrypt.CompareHashAndPassword(h, []byte(password)) != nil || !ok {
		return Identity{}, ErrBadCredentials
	}
	return Identity{Subject: "sub-" + email, Email: email}, nil
}

func (d *bcryptDir) Lookup(_ context.Context, subject string) (Identity, error) {
	email := strings.TrimPrefix(subject, "sub-")
	return Identity{Subject: subject, Email: email}, nil
}

type harness struct {
	p    *Provider
	base string // the issuer URL
	c    *http.Client
	dir  *bcryptDir
	logs *syncBuffer
	now  *atomic.Int64 // unix nanoseconds of the injected clock
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs a provider over loopback HTTP until the test ends.
func start(t testing.TB, o Options, users map[string]string) *harness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{dir: newDir(t, users), logs: &syncBuffer{}, now: &atomic.Int64{}}
	h.now.Store(time.Now().UnixNano())
	h.base = "http://" + ln.Addr().String() + "/oauth2"
	o.Issuer, o.Directory, o.Key = h.base, h.dir, testKey()
	o.Clients = []ClientConfig{{ID: clientID, Native: true, RedirectURIs: []string{"http://127.0.0.1/cb"}}}
	o.Log = slog.New(slog.NewTextHandler(h.logs, nil))
	o.Now = func() time.Time { return time.Unix(0, h.now.Load()) }
	if h.p, err = New(o); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h.p, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Shutdown(context.Background())
		<-done
	})
	h.c = &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{MaxIdleConnsPerHost: 16},
	}
	t.Cleanup(h.c.CloseIdleConnections)
	return h
}

func (h *harness) advance(d time.Duration) { h.now.Add(int64(d)) }

// do sends a request from src (as X-Forwarded-For; only believed when
// the provider trusts loopback) and returns the status and body.
func (h *harness) do(t testing.TB, method, path string, form url.Values, src string) (int, string, http.Header) {
	t.Helper()
	var body io.Reader
	u := h.base + path
	if method == http.MethodGet {
		u += "?" + form.Encode()
	} else {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if src != "" {
		req.Header.Set("X-Forwarded-For", src)
	}
	resp, err := h.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func challenge() string {
	sum := sha256.Sum256([]byte("verifier-verifier-verifier-verifier-verifier"))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorizeForm is a valid authorization request.
func authorizeForm() url.Values {
	return url.Values{
		"client_id": {clientID}, "redirect_uri": {"http://127.0.0.1/cb"}, "response_type": {"code"},
		"scope": {"openid email"}, "state": {"s"}, "code_challenge": {challenge()}, "code_challenge_method": {"S256"},
	}
}

// maximal is a valid authorization request with every stored field at
// its cap.
func maximal() url.Values {
	f := authorizeForm()
	f.Set("state", strings.Repeat("s", paramCaps["state"]))
	f.Set("nonce", strings.Repeat("n", paramCaps["nonce"]))
	f.Set("login_hint", strings.Repeat("l", paramCaps["login_hint"]))
	f.Set("acr_values", strings.Repeat("a", paramCaps["acr_values"]))
	f.Set("ui_locales", strings.Repeat("e", paramCaps["ui_locales"]))
	f.Set("scope", "openid email profile groups"+strings.Repeat(" x", maxScopes-4))
	return f
}

// authorize starts a login from src and returns its request ID.
func (h *harness) authorize(t testing.TB, src string) string {
	t.Helper()
	code, body, hdr := h.do(t, http.MethodGet, "/authorize", authorizeForm(), src)
	if code != http.StatusFound {
		t.Fatalf("authorize: %d %s", code, body)
	}
	loc, err := url.Parse(hdr.Get("Location"))
	if err != nil || loc.Query().Get("authRequestID") == "" {
		t.Fatalf("authorize redirected to %q", hdr.Get("Location"))
	}
	return loc.Query().Get("authRequestID")
}

// login posts the login form from src.
func (h *harness) login(t testing.TB, id, email, password, src string) int {
	t.Helper()
	code, _, _ := h.do(t, http.MethodPost, loginPath, url.Values{"authRequestID": {id}, "email": {email}, "password": {password}}, src)
	return code
}

func oauthErr(t testing.TB, body string) (code, desc string) {
	t.Helper()
	var e struct{ Error, ErrorDescription string }
	var m map[string]string
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("not an OAuth error: %q", body)
	}
	e.Error, e.ErrorDescription = m["error"], m["error_description"]
	return e.Error, e.ErrorDescription
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// TestFieldCaps: every client-supplied field is bounded; a request past a
// bound gets an OAuth invalid_request naming the field and holds nothing.
func TestFieldCaps(t *testing.T) {
	h := start(t, Options{}, nil)
	long := func(name string, extra int) url.Values {
		f := authorizeForm()
		n := maxOther
		if c, ok := paramCaps[name]; ok {
			n = c
		}
		f.Set(name, strings.Repeat("x", n+extra))
		return f
	}
	for _, tc := range []struct {
		name, path string
		form       url.Values
		status     int
		desc       string
	}{
		{"state", "/authorize", long("state", 1), 400, `"state" is longer than 1024 bytes`},
		{"nonce", "/authorize", long("nonce", 1), 400, `"nonce"`},
		{"redirect_uri", "/authorize", long("redirect_uri", 1), 400, `"redirect_uri"`},
		{"code_challenge", "/authorize", long("code_challenge", 1), 400, `"code_challenge"`},
		{"login_hint", "/authorize", long("login_hint", 1), 400, `"login_hint"`},
		{"unknown parameter", "/authorize", long("whatever", 1), 400, `"whatever"`},
		{"too many scopes", "/authorize", func() url.Values {
			f := authorizeForm()
			f.Set("scope", "openid"+strings.Repeat(" x", maxScopes))
			return f
		}(), 400, "scopes"},
		{"100 KB state in the query", "/authorize", long("state", 100<<10), 414, "query"},
		{"device scope", "/device_authorization", url.Values{"client_id": {clientID}, "scope": {strings.Repeat("x", 1025)}}, 400, `"scope"`},
		{"device client_id", "/device_authorization", url.Values{"client_id": {strings.Repeat("c", 129)}}, 400, `"client_id"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodGet
			if strings.HasPrefix(tc.path, "/device") {
				method = http.MethodPost
			}
			status, body, _ := h.do(t, method, tc.path, tc.form, "")
			if status != tc.status {
				t.Fatalf("status %d, want %d (%.200s)", status, tc.status, body)
			}
			code, desc := oauthErr(t, body)
			if code != "invalid_request" || !strings.Contains(desc, tc.desc) {
				t.Fatalf("error %q %q, want invalid_request mentioning %q", code, desc, tc.desc)
			}
			if pd := h.p.st.pendingNow(); pd != (Pending{}) {
				t.Fatalf("a refused request is held: %+v", pd)
			}
		})
	}
	// A large POSTed authorize body is bounded too.
	status, _, _ := h.do(t, http.MethodPost, "/authorize", long("state", 5<<20), "")
	if status != http.StatusBadRequest {
		t.Fatalf("5 MB POSTed state: %d, want 400", status)
	}
	// Fields exactly at their caps are accepted.
	status, body, _ := h.do(t, http.MethodGet, "/authorize", maximal(), "")
	if status != http.StatusFound {
		t.Fatalf("request at the caps: %d %s", status, body)
	}
}

// TestPendingCaps: pending logins and device codes are bounded per source
// and overall; past a bound new ones are refused with an OAuth error and
// counted, and the ones held stay valid.
func TestPendingCaps(t *testing.T) {
	h := start(t, Options{TrustedProxies: loopback, Limits: Limits{MaxPending: 5, MaxPendingPerSource: 3}}, map[string]string{"a@example.com": "right"})
	device := func(src string) (int, string) {
		s, b, _ := h.do(t, http.MethodPost, "/device_authorization", url.Values{"client_id": {clientID}, "scope": {"openid"}}, src)
		return s, b
	}
	first := h.authorize(t, "192.0.2.1")
	h.authorize(t, "192.0.2.1")
	if s, b := device("192.0.2.1"); s != http.StatusOK {
		t.Fatalf("device code within the cap: %d %s", s, b)
	}
	status, body, _ := h.do(t, http.MethodGet, "/authorize", authorizeForm(), "192.0.2.1")
	if code, _ := oauthErr(t, body); status != http.StatusTooManyRequests || code != "temporarily_unavailable" {
		t.Fatalf("4th pending from one source: %d %s", status, body)
	}
	if s, b := device("192.0.2.1"); s != http.StatusTooManyRequests {
		t.Fatalf("device code past the source's cap: %d %s", s, b)
	}
	h.authorize(t, "192.0.2.2")
	h.authorize(t, "192.0.2.2")
	if s, b := device("192.0.2.3"); s != http.StatusServiceUnavailable {
		t.Fatalf("device code past the overall cap: %d %s", s, b)
	}
	if pd := h.p.st.pendingNow(); pd.AuthRequests+pd.DeviceCodes != 5 || pd.Sources != 2 {
		t.Fatalf("held %+v, want 5 from 2 sources", pd)
	}
	// Held requests were not evicted: the first still completes.
	if code := h.login(t, first, "a@example.com", "right", "192.0.2.1"); code != http.StatusFound {
		t.Fatalf("login on a held request: %d", code)
	}
	var got []string
	for _, s := range h.p.Metrics() {
		if s.Name == "oidc_requests_refused_total" && s.Value > 0 {
			got = append(got, fmt.Sprintf("%s=%g", s.Labels, s.Value))
		}
	}
	if want := `reason="pending_per_source"=2 reason="pending_total"=1`; strings.Join(got, " ") != want {
		t.Fatalf("refusal metrics %v, want %s", got, want)
	}
	// Expired entries make room again.
	h.advance(pendingLifetime + time.Second)
	h.authorize(t, "192.0.2.3")
}

// TestFloodMemoryBound floods the provider with authorization and device
// requests carrying fields at their caps (and some past them) from many
// sources: the count stays at the cap and the heap grows by less than
// the cap times the largest entry, plus slack for the server itself.
func TestFloodMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("flood")
	}
	const (
		maxPending = 1000
		sources    = 100
		perSource  = 20 // 12 logins and 8 device codes each: 2000 in all
		// bound: maxPending entries of at most 8 KiB (fields at their caps
		// plus pkg/op's and the maps' overhead), plus 8 MiB for the HTTP
		// server, connections and the garbage of the flood.
		bound = maxPending*8<<10 + 8<<20
	)
	h := start(t, Options{TrustedProxies: loopback, Limits: Limits{MaxPending: maxPending, MaxPendingPerSource: 15}}, nil)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	var wg sync.WaitGroup
	var unexpected atomic.Int64
	jobs := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				src := fmt.Sprintf("198.51.%d.%d", j/perSource/250, j/perSource%250)
				var status int
				switch k := j % perSource; {
				case k == 0: // past the caps: refused outright
					f := maximal()
					f.Set("state", strings.Repeat("s", 12<<10))
					status, _, _ = h.do(t, http.MethodGet, "/authorize", f, src)
					if status != http.StatusBadRequest {
						unexpected.Add(1)
					}
					continue
				case k < 12:
					status, _, _ = h.do(t, http.MethodGet, "/authorize", maximal(), src)
				default:
					status, _, _ = h.do(t, http.MethodPost, "/device_authorization",
						url.Values{"client_id": {clientID}, "scope": {"openid email profile groups" + strings.Repeat(" x", 12)}}, src)
				}
				if status != http.StatusFound && status != http.StatusOK && status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
					unexpected.Add(1)
				}
			}
		}()
	}
	for j := range sources * perSource {
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	h.c.CloseIdleConnections()

	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	pd := h.p.st.pendingNow()
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("held %+v; heap grew %d KiB (bound %d KiB)", pd, growth/1024, bound/1024)
	if n := unexpected.Load(); n > 0 {
		t.Fatalf("%d answers were neither accepted nor refused with a bound", n)
	}
	if pd.AuthRequests+pd.DeviceCodes != maxPending {
		t.Fatalf("held %d, want the cap %d", pd.AuthRequests+pd.DeviceCodes, maxPending)
	}
	if pd.Bytes > h.p.st.limits.MaxPendingBytes {
		t.Fatalf("%d bytes charged, cap %d", pd.Bytes, h.p.st.limits.MaxPendingBytes)
	}
	if growth > bound {
		t.Fatalf("heap grew %d bytes, bound %d", growth, bound)
	}
}

// TestParallelGuessesEvaluatedAtMostBurst: 60 wrong passwords at once
// from one source for one e-mail get exactly the burst of bcrypt
// comparisons; the rest are refused without one.
func TestParallelGuessesEvaluatedAtMostBurst(t *testing.T) {
	h := start(t, Options{}, map[string]string{"a@example.com": "right"})
	var wg sync.WaitGroup
	var limited atomic.Int64
	for range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if h.login(t, "none", "a@example.com", "wrong", "") == http.StatusTooManyRequests {
				limited.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := h.dir.evals.Load(); n != pairBurst {
		t.Fatalf("60 parallel guesses: %d evaluated, want %d", n, pairBurst)
	}
	if limited.Load() != 60-pairBurst {
		t.Fatalf("%d refused, want %d", limited.Load(), 60-pairBurst)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "login failed") || !strings.Contains(logs, "login refused") || strings.Contains(logs, "wrong") {
		t.Fatalf("logs must record failures and limit trips, never the password:\n%s", logs)
	}
}

// TestLimitKeyedBySourceAndEmail: an attacker guessing one e-mail's
// password from a shared address does not lock out other e-mails from
// that address, nor the victim from elsewhere below the per-e-mail cap.
func TestLimitKeyedBySourceAndEmail(t *testing.T) {
	h := start(t, Options{TrustedProxies: loopback}, map[string]string{"a@example.com": "right-a", "b@example.com": "right-b"})
	const nat, home = "203.0.113.1", "198.51.100.7"
	for range pairBurst {
		if code := h.login(t, "none", "b@example.com", "guess", nat); code != http.StatusUnauthorized {
			t.Fatalf("guess: %d", code)
		}
	}
	if code := h.login(t, "none", "B@example.com ", "guess", nat); code != http.StatusTooManyRequests {
		t.Fatalf("guess past the burst (other spelling): %d, want 429", code)
	}
	if code := h.login(t, h.authorize(t, nat), "a@example.com", "right-a", nat); code != http.StatusFound {
		t.Fatalf("another e-mail from the attacker's address: %d, want a login", code)
	}
	if code := h.login(t, h.authorize(t, home), "b@example.com", "right-b", home); code != http.StatusFound {
		t.Fatalf("the victim from another address: %d, want a login", code)
	}
}

// TestPerEmailCap: many sources guessing one e-mail are bounded in all.
func TestPerEmailCap(t *testing.T) {
	h := start(t, Options{TrustedProxies: loopback}, map[string]string{"a@example.com": "right"})
	for i := range emailBurst {
		src := fmt.Sprintf("192.0.2.%d", i/pairBurst+1)
		if code := h.login(t, "none", "a@example.com", "guess", src); code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, code)
		}
	}
	if code := h.login(t, "none", "a@example.com", "guess", "192.0.2.200"); code != http.StatusTooManyRequests {
		t.Fatalf("guess past the per-e-mail cap: %d, want 429", code)
	}
	if n := h.dir.evals.Load(); n != emailBurst {
		t.Fatalf("%d evaluated, want %d", n, emailBurst)
	}
	h.advance(refill)
	if code := h.login(t, h.authorize(t, "192.0.2.200"), "a@example.com", "right", "192.0.2.200"); code != http.StatusFound {
		t.Fatalf("after a refill: %d, want a login", code)
	}
}

// TestForwardedForOnlyFromTrustedProxies: without trusted proxies a
// client's X-Forwarded-For does not pick its bucket.
func TestForwardedForOnlyFromTrustedProxies(t *testing.T) {
	h := start(t, Options{}, map[string]string{"a@example.com": "right"})
	for i := range pairBurst {
		h.login(t, "none", "a@example.com", "guess", fmt.Sprintf("192.0.2.%d", i))
	}
	if code := h.login(t, "none", "a@example.com", "guess", "192.0.2.99"); code != http.StatusTooManyRequests {
		t.Fatalf("a forged X-Forwarded-For escaped the limit: %d", code)
	}
}

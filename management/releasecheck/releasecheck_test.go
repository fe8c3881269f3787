package releasecheck_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/releasecheck"
)

func TestCompare(t *testing.T) {
	// Each version precedes the next (the example of semver.org, 11).
	order := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11",
		"1.0.0-rc.1", "1.0.0", "v1.0.1", "1.2.0", "1.10.0", "2.0.0"}
	for i := range order {
		for j := range order {
			a, err := releasecheck.ParseVersion(order[i])
			if err != nil {
				t.Fatal(err)
			}
			b, _ := releasecheck.ParseVersion(order[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.Compare(b); got != want {
				t.Errorf("compare(%s, %s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
	if a, _ := releasecheck.ParseVersion("1.0.0+build.5"); a.Compare(releasecheck.Version{Major: 1}) != 0 {
		t.Error("build metadata takes part in precedence")
	}
	for _, bad := range []string{"", "1", "1.2", "1.2.3.4", "01.2.3", "1.2.x", "1.2.3-", "1.2.3-01", "1.2.3-a..b", "1.2.3+", "1.2.3-a b", "dev", "v", "-1.2.3", "1.2.99999999999999999999"} {
		if _, err := releasecheck.ParseVersion(bad); !errors.Is(err, releasecheck.ErrBadVersion) {
			t.Errorf("ParseVersion(%q) = %v, want ErrBadVersion", bad, err)
		}
	}
}

func TestNewer(t *testing.T) {
	for _, c := range []struct {
		current, latest string
		newer, ok       bool
	}{
		{"0.77.1", "0.78.0", true, true},
		{"0.77.1", "0.77.1", false, true},
		{"0.77.1", "0.9.0", false, true}, // numeric, not text, order
		{"0.2.0-rc.1", "0.2.0", true, true},
		{"0.1.0+3.gabc1234.dirty", "0.1.0", false, true}, // a build past the tag (Makefile VERSION) is not older than it
		{"0.1.0+3.gabc1234.dirty", "0.2.0", true, true},
		{"0.78.0", "0.78.0-rc.1", false, true},
		{"dev", "0.78.0", false, false},
		{"0.77.1", "soon", false, false},
	} {
		if newer, ok := releasecheck.Newer(c.current, c.latest); newer != c.newer || ok != c.ok {
			t.Errorf("Newer(%s, %s) = %v, %v; want %v, %v", c.current, c.latest, newer, ok, c.newer, c.ok)
		}
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		body string
		want releasecheck.Latest
	}{
		{`{"management": "0.78.0", "dashboard": "v2.12.0"}`, releasecheck.Latest{Management: "0.78.0", Dashboard: "2.12.0"}},
		{`{"dashboard": "2.12.0"}`, releasecheck.Latest{Dashboard: "2.12.0"}},
		{`{"tag_name": "v0.78.1", "name": "Release 0.78.1", "assets": []}`, releasecheck.Latest{Management: "0.78.1"}},
		{"v0.78.0\n", releasecheck.Latest{Management: "0.78.0"}},
		{"  0.79.0-rc.1+abc ", releasecheck.Latest{Management: "0.79.0-rc.1"}},
	} {
		got, err := releasecheck.Parse([]byte(c.body))
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", c.body, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "{}", `{"management": 78}`, `{"management": "latest"}`, `{"management": "0.78.0", "dashboard": "x"}`,
		"{", "<html>0.78.0</html>", "0.78.0\n0.79.0", "0.78.0 is out", "null"} {
		if _, err := releasecheck.Parse([]byte(bad)); !errors.Is(err, releasecheck.ErrMalformed) {
			t.Errorf("Parse(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"management":"0.78.0","dashboard":"2.1.0"}`, "v1.2.3-rc.1+b", `{"tag_name":"v1.0.0"}`, "1.2.3-0a.01"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := releasecheck.Parse(b)
		if err != nil {
			return
		}
		// What parses is canonical: it parses again to itself.
		for _, v := range []string{l.Management, l.Dashboard} {
			if v == "" {
				continue
			}
			p, err := releasecheck.ParseVersion(v)
			if err != nil || p.String() != v {
				t.Fatalf("%q parsed to %q, which reparses to %q, %v", b, v, p.String(), err)
			}
		}
	})
}

// feed is a release feed on a real HTTP server counting its requests.
type feed struct {
	srv  *httptest.Server
	hits atomic.Int64
}

func newFeed(t *testing.T, h http.HandlerFunc) *feed {
	f := &feed{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestCheckerCachesForTheInterval(t *testing.T) {
	var body atomic.Value
	body.Store(`{"management": "0.78.0", "dashboard": "2.12.0"}`)
	f := newFeed(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("User-Agent"), "test/") {
			t.Errorf("user agent %q", r.Header.Get("User-Agent"))
		}
		w.Write([]byte(body.Load().(string)))
	})
	clk := &clock{now: time.Unix(1e9, 0)}
	c, err := releasecheck.New(releasecheck.Options{URL: f.srv.URL, Now: clk.Now, UserAgent: "test/1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := releasecheck.Latest{Management: "0.78.0", Dashboard: "2.12.0"}
	for range 3 {
		if got, err := c.Latest(ctx); err != nil || got != want {
			t.Fatalf("Latest = %+v, %v; want %+v", got, err, want)
		}
	}
	body.Store("0.79.0")
	clk.Add(releasecheck.DefaultInterval - time.Second)
	if got, _ := c.Latest(ctx); got != want || f.hits.Load() != 1 {
		t.Fatalf("within the interval: %+v after %d fetches, want the cached answer after 1", got, f.hits.Load())
	}
	clk.Add(time.Second)
	if got, err := c.Latest(ctx); err != nil || got.Management != "0.79.0" || f.hits.Load() != 2 {
		t.Fatalf("after the interval: %+v, %v after %d fetches", got, err, f.hits.Load())
	}
}

func TestCheckerConcurrentCallersFetchOnce(t *testing.T) {
	release := make(chan struct{})
	f := newFeed(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.Write([]byte("1.0.0"))
	})
	c, _ := releasecheck.New(releasecheck.Options{URL: f.srv.URL})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l, err := c.Latest(context.Background()); err != nil || l.Management != "1.0.0" {
				t.Errorf("Latest = %+v, %v", l, err)
			}
		}()
	}
	// A caller that gives up while the fetch is under way gets its
	// context's error, and the fetch goes on for the others.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	for f.hits.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := c.Latest(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting caller: %v, want its deadline", err)
	}
	close(release)
	wg.Wait()
	if n := f.hits.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
}

func TestCheckerBadFeeds(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, c := range []struct {
		name string
		h    http.HandlerFunc
		want error
	}{
		{"malformed", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"management": "next week"}`)) }, releasecheck.ErrMalformed},
		{"html", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("<html><body>0.78.0</body></html>")) }, releasecheck.ErrMalformed},
		{"not found", func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) }, releasecheck.ErrMalformed},
		{"oversized", func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte(`{"management": "0.78.0", "notes": "` + strings.Repeat("x", 2<<10) + `"}`))
		}, releasecheck.ErrTooLarge},
		{"endless", func(w http.ResponseWriter, r *http.Request) {
			chunk := []byte(strings.Repeat("9", 1024))
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, releasecheck.ErrTooLarge},
		{"slow headers", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}, context.DeadlineExceeded},
		{"slow body", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"management": `))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}, context.DeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFeed(t, c.h)
			clk := &clock{now: time.Unix(1e9, 0)}
			ch, _ := releasecheck.New(releasecheck.Options{URL: f.srv.URL, Timeout: timeout, MaxBytes: 1 << 10, Now: clk.Now})
			start := time.Now()
			l, err := ch.Latest(context.Background())
			if !errors.Is(err, c.want) || l != (releasecheck.Latest{}) {
				t.Fatalf("Latest = %+v, %v; want %v", l, err, c.want)
			}
			if d := time.Since(start); d > timeout+2*time.Second {
				t.Fatalf("took %v with a %v timeout", d, timeout)
			}
			// The failure is cached: no second request within the interval.
			if _, err := ch.Latest(context.Background()); !errors.Is(err, c.want) || f.hits.Load() != 1 {
				t.Fatalf("second call: %v after %d fetches", err, f.hits.Load())
			}
			clk.Add(releasecheck.DefaultInterval)
			ch.Latest(context.Background())
			if f.hits.Load() != 2 {
				t.Fatalf("%d fetches after the interval, want 2", f.hits.Load())
			}
		})
	}
}

func TestCheckerOffAndBadURL(t *testing.T) {
	c, err := releasecheck.New(releasecheck.Options{})
	if c != nil || err != nil {
		t.Fatalf("no URL: %v, %v; want off", c, err)
	}
	if _, err := c.Latest(context.Background()); !errors.Is(err, releasecheck.ErrOff) {
		t.Fatalf("off: %v", err)
	}
	for _, u := range []string{"releases.example.com/latest", "ftp://example.com/x", "http://", "://x"} {
		if _, err := releasecheck.New(releasecheck.Options{URL: u}); err == nil {
			t.Errorf("URL %q accepted", u)
		}
	}
}

package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/version"
	"github.com/wiremesh/wiremesh/management/httpapi"
	"github.com/wiremesh/wiremesh/management/releasecheck"
)

// TestInstanceVersionReleaseCheck: with a release feed (a real HTTP server)
// GET /api/instance/version reports the available versions and whether
// the management one is newer; while the feed fails, they are left out,
// never a false "no update". Answers are checked against openapi.json.
func TestInstanceVersionReleaseCheck(t *testing.T) {
	var body atomic.Value
	body.Store(`{"management": "v999.1.0", "dashboard": "2.12.0"}`)
	feed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(body.Load().(string))) }))
	t.Cleanup(feed.Close)
	var now atomic.Int64 // the checker's clock, in seconds
	checker, err := releasecheck.New(releasecheck.Options{URL: feed.URL, Now: func() time.Time { return time.Unix(now.Load(), 0) }})
	if err != nil {
		t.Fatal(err)
	}
	d := newDocRig(t, engines.Engines()[0], func(o *httpapi.Options) { o.Releases = checker })
	d.token = str(d.call("POST", "/api/setup", "/api/setup", map[string]any{"email": "owner@example.com", "password": ownerPassword, "name": "Owner", "create_pat": true}, 200), "personal_access_token")
	get := func() map[string]any {
		t.Helper()
		return obj(d.call("GET", "/api/instance/version", "/api/instance/version", nil, 200))
	}
	for _, c := range []struct {
		feed string
		want map[string]any
	}{
		{`{"management": "v999.1.0", "dashboard": "2.12.0"}`, map[string]any{"management_current_version": version.Version,
			"management_available_version": "999.1.0", "dashboard_available_version": "2.12.0", "management_update_available": true}},
		{"0.0.1", map[string]any{"management_current_version": version.Version, "management_available_version": "0.0.1", "management_update_available": false}},
		// Only the dashboard's: whether management is up to date is unknown.
		{`{"dashboard": "2.13.0"}`, map[string]any{"management_current_version": version.Version, "dashboard_available_version": "2.13.0"}},
		{"<html>rate limited</html>", map[string]any{"management_current_version": version.Version}},
	} {
		body.Store(c.feed)
		now.Add(int64(releasecheck.DefaultInterval / time.Second))
		got := get()
		if len(got) != len(c.want) {
			t.Fatalf("feed %q: %v, want %v", c.feed, got, c.want)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Fatalf("feed %q: %s = %v, want %v (%v)", c.feed, k, got[k], v, got)
			}
		}
	}
	// Within the interval the failure stays cached, even once the feed
	// is fixed.
	body.Store("999.0.0")
	if got := get(); len(got) != 1 {
		t.Fatalf("within the interval after a failure: %v", got)
	}
}

package restapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wiremesh/wiremesh/internal/pgtest"
	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/management/store"
)

// stats are one endpoint's timings on one server.
type stats struct {
	Calls int     `json:"calls"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	Bytes int     `json:"bytes"`
	Items int     `json:"items"` // array length of the response, -1 for an object
}

// result is one dataset size: per server, per endpoint.
type result struct {
	Peers    int                         `json:"peers"`
	Groups   int                         `json:"groups"`
	Policies int                         `json:"policies"`
	Users    int                         `json:"users"`
	Servers  map[string]map[string]stats `json:"servers"`
}

const (
	oursSQLite   = "wiremesh-sqlite"
	oursPostgres = "wiremesh-postgres"
	netbird      = "netbird-sqlite"
)

// TestBenchRESTAPI seeds each server with the same account and times the
// REST API's list endpoints over HTTP with a personal access token: ours
// on SQLite and on Postgres, and NetBird's own management server (the
// baseline, when scripts/netbird-official.sh has built it) on SQLite.
func TestBenchRESTAPI(t *testing.T) {
	if os.Getenv("WIREMESH_BENCH") == "" {
		t.Skip("benchmarks run with WIREMESH_BENCH=1 (bash bench/restapi.sh)")
	}
	sizes := envInts(t, "WIREMESH_BENCH_REST_PEERS", []int{10000})
	calls := envInts(t, "WIREMESH_BENCH_REST_CALLS", []int{50})[0]
	nbBin, nbSrc := os.Getenv("NB_OFFICIAL_SERVER"), os.Getenv("NB_OFFICIAL_SRC")
	var results []result
	for _, n := range sizes {
		d := newDataset(n)
		r := result{Peers: d.peers, Groups: d.groups, Policies: d.policies, Users: d.users, Servers: map[string]map[string]stats{}}
		t.Run(fmt.Sprintf("%d/%s", n, oursSQLite), func(t *testing.T) {
			dir := t.TempDir()
			t0 := time.Now()
			token := seedOurs(t, store.Config{Engine: store.SQLite, DataDir: dir}, d)
			t.Logf("seeded in %v", time.Since(t0).Round(time.Millisecond))
			url := startOurs(t, token, "--datadir", dir)
			r.Servers[oursSQLite] = measure(t, url, token, d, calls)
		})
		if os.Getenv("WIREMESH_BENCH_REST_POSTGRES") != "0" {
			t.Run(fmt.Sprintf("%d/%s", n, oursPostgres), func(t *testing.T) {
				dsn := pgtest.Start(t).NewDatabase(t)
				t0 := time.Now()
				token := seedOurs(t, store.Config{Engine: store.Postgres, DSN: dsn}, d)
				analyze(t, dsn)
				t.Logf("seeded in %v", time.Since(t0).Round(time.Millisecond))
				url := startOurs(t, token, "--datadir", t.TempDir(), "--store", "postgres", "--store-dsn", dsn)
				r.Servers[oursPostgres] = measure(t, url, token, d, calls)
			})
		}
		if nbBin != "" && nbSrc != "" {
			t.Run(fmt.Sprintf("%d/%s", n, netbird), func(t *testing.T) {
				url, token, _ := startNetBird(t, nbBin, nbSrc, d)
				r.Servers[netbird] = measure(t, url, token, d, calls)
			})
		} else {
			t.Log("NB_OFFICIAL_SERVER / NB_OFFICIAL_SRC not set: no baseline (bash bench/restapi.sh builds NetBird's server)")
		}
		results = append(results, r)
	}
	report(t, results)
}

// startOurs runs bin/netbird-server (management, signal, relay off) on the
// seeded store and waits for the API to accept the token.
func startOurs(t *testing.T, token string, storeArgs ...string) string {
	t.Helper()
	url, _ := startOursEnv(t, token, nil, storeArgs...)
	return url
}

// startOursEnv is startOurs with extra environment for the server,
// returning its process too.
func startOursEnv(t *testing.T, token string, env []string, storeArgs ...string) (string, *proctest.Proc) {
	t.Helper()
	port := freePort(t)
	args := append([]string{"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--stun-port", "0", "--disable-relay", "--builtin-idp=false"}, storeArgs...)
	if os.Getenv("WIREMESH_BENCH_PPROF") != "" {
		args = append(args, "--debug-pprof")
	}
	srv := proctest.Start(t, env, "netbird-server", args...)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, url+"/api/users", token, srv, 200)
	t.Logf("serving at %s", url)
	return url, srv
}

// endpoints are the requests timed, in the table's order.
func endpoints(d dataset) []string {
	p := d.peerID(d.peers / 2)
	return []string{"/api/peers", "/api/groups", "/api/policies", "/api/users", "/api/setup-keys", "/api/events",
		"/api/peers/" + p, "/api/peers/" + p + "/accessible-peers"}
}

// measure calls each endpoint (two warm-up calls, then calls timed ones,
// one at a time over a kept-alive connection). An endpoint that takes over
// two minutes in all stops early, after at least five timed calls.
func measure(t *testing.T, url, token string, d dataset, calls int) map[string]stats {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Minute}
	out := map[string]stats{}
	for _, ep := range endpoints(d) {
		var s stats
		var times []time.Duration
		begin := time.Now()
		var buf bytes.Buffer
		for i := range calls + 2 {
			buf.Reset()
			t0 := time.Now()
			getInto(t, c, url+ep, token, &buf)
			took := time.Since(t0)
			if i < 2 {
				s.Bytes = buf.Len()
				s.Items = items(buf.Bytes())
				buf.Grow(2 * s.Bytes) // timed calls read into room already there
				continue
			}
			if buf.Len() != s.Bytes && s.Items >= 0 {
				// A list answer of another size is another answer: the
				// dataset does not change while it is measured.
				t.Fatalf("GET %s: %d bytes, the warm-up call had %d", ep, buf.Len(), s.Bytes)
			}
			times = append(times, took)
			if len(times) >= 5 && time.Since(begin) > 2*time.Minute {
				break
			}
		}
		slices.Sort(times)
		s.Calls = len(times)
		s.P50ms = ms(percentile(times, 50))
		s.P99ms = ms(percentile(times, 99))
		s.MaxMs = ms(times[len(times)-1])
		out[ep] = s
		t.Logf("%-60s p50 %8.2f ms  p99 %8.2f ms  max %8.2f ms  %9d bytes  %6d items  (%d calls)", ep, s.P50ms, s.P99ms, s.MaxMs, s.Bytes, s.Items, s.Calls)
	}
	return out
}

// get returns the answer to an authorised GET.
func get(t *testing.T, c *http.Client, url, token string) []byte {
	t.Helper()
	var buf bytes.Buffer
	getInto(t, c, url, token, &buf)
	return buf.Bytes()
}

// getInto reads the answer into buf. The buffer is reused across calls, so
// that the time measured is the server's and the transfer's, not the
// client growing a fresh 12 MB slice (io.ReadAll's doubling and the GC
// it causes in this process added up to ~28 ms to the slowest calls of
// every server measured).
func getInto(t *testing.T, c *http.Client, url, token string, buf *bytes.Buffer) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Token "+token)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		body := buf.Bytes()
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body[:min(len(body), 300)])
	}
}

func items(body []byte) int {
	var list []json.RawMessage
	if json.Unmarshal(body, &list) != nil {
		return -1
	}
	return len(list)
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p+99)/100 - 1
	return sorted[max(i, 0)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// waitHTTP polls url until it answers want (the server is up and, for 200,
// its store holds the token), failing if the process exits first.
func waitHTTP(t *testing.T, url, token string, p *proctest.Proc, want int) {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	deadline := time.Now().Add(3 * time.Minute)
	last := ""
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Token "+token)
		}
		if resp, err := c.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
			last = fmt.Sprintf("%s: %s", resp.Status, b[:min(len(b), 300)])
		} else {
			last = err.Error()
		}
		select {
		case <-p.Exited():
			t.Fatalf("server exited:\n%s", tail(p.Output()))
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Fatalf("%s never answered %d (last: %s)\n%s", url, want, last, tail(p.Output()))
}

func tail(s string) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(len(lines)-40, 0):], "\n")
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

func envInts(t *testing.T, name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Fields(strings.ReplaceAll(v, ",", " ")) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			t.Fatalf("%s: bad number %q", name, f)
		}
		out = append(out, n)
	}
	return out
}

// report prints the table (ours beside the baseline, the ratio of
// NetBird's p99 to ours) and writes the JSON file.
func report(t *testing.T, results []result) {
	var b strings.Builder
	for _, r := range results {
		fmt.Fprintf(&b, "\nREST API, one account: %d peers, %d groups, %d policies, %d users (p50/p99 in ms; ratio = NetBird p99 / wiremesh-sqlite p99)\n",
			r.Peers, r.Groups, r.Policies, r.Users)
		fmt.Fprintf(&b, "%-40s %18s %18s %18s %8s %22s\n", "endpoint", "wiremesh sqlite", "wiremesh postgres", "NetBird sqlite", "ratio", "bytes ours/NetBird")
		d := newDatasetIDs(r.Peers)
		for _, ep := range endpoints(d) {
			o, pg, nb := r.Servers[oursSQLite][ep], r.Servers[oursPostgres][ep], r.Servers[netbird][ep]
			ratio := "-"
			if nb.Calls > 0 && o.P99ms > 0 {
				ratio = fmt.Sprintf("%.1fx", nb.P99ms/o.P99ms)
			}
			fmt.Fprintf(&b, "%-40s %18s %18s %18s %8s %22s\n", strings.Replace(ep, d.peerID(d.peers/2), "{id}", 1), pair(o), pair(pg), pair(nb), ratio, fmt.Sprintf("%d/%d", o.Bytes, nb.Bytes))
		}
	}
	fmt.Print(b.String())
	out := os.Getenv("WIREMESH_BENCH_REST_JSON")
	if out == "" {
		out = filepath.Join(proctest.Root(), "bench", "restapi.json")
	}
	js, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, append(js, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// newDatasetIDs is a dataset of n peers for naming only (no keys).
func newDatasetIDs(n int) dataset {
	return dataset{peers: n, groups: max(n/10, 1), policies: max(n/10, 1)}
}

func pair(s stats) string {
	if s.Calls == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f/%.1f", s.P50ms, s.P99ms)
}

// analyze gathers the planner's statistics of a freshly seeded Postgres
// database, as autovacuum does after such a load: without them Postgres
// plans lookups of a few peers by ID as scans of the whole account.
func analyze(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "ANALYZE"); err != nil {
		t.Fatalf("analyze: %v", err)
	}
}

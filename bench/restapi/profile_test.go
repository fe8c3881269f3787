package restapi

import (
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/store"
)

// TestProfileRESTAPI finds where one endpoint's time goes: it seeds our
// server (SQLite) as TestBenchRESTAPI does, starts it with Go's profiles
// served and the GC traced, calls the endpoint one request at a time for
// $WIREMESH_BENCH_PROFILE_SECONDS (default 20) while taking a CPU profile
// of the server, then writes cpu.pprof, allocs.pprof and the server's GC
// trace into the directory $WIREMESH_BENCH_PROFILE names, and logs the
// timings and GC cycles seen. Read the profiles with `go tool pprof`.
//
//	WIREMESH_BENCH_PROFILE=/tmp/prof go test -count=1 -run TestProfileRESTAPI ./bench/restapi/
func TestProfileRESTAPI(t *testing.T) {
	out := os.Getenv("WIREMESH_BENCH_PROFILE")
	if out == "" {
		t.Skip("profiles are taken with WIREMESH_BENCH_PROFILE=dir")
	}
	n := envInts(t, "WIREMESH_BENCH_REST_PEERS", []int{10000})[0]
	secs := envInts(t, "WIREMESH_BENCH_PROFILE_SECONDS", []int{20})[0]
	ep := os.Getenv("WIREMESH_BENCH_PROFILE_PATH")
	if ep == "" {
		ep = "/api/peers"
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	d := newDataset(n)
	dir := t.TempDir()
	token := seedOurs(t, store.Config{Engine: store.SQLite, DataDir: dir}, d)
	url, srv := startOursEnv(t, token, []string{"GODEBUG=gctrace=1"}, "--datadir", dir, "--debug-pprof")
	c := &http.Client{Timeout: 5 * time.Minute}
	for range 2 {
		get(t, c, url+ep, token)
	}
	gcBefore := strings.Count(srv.Output(), "gc ")

	cpu := make(chan []byte, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, url+"/debug/pprof/profile?seconds="+strconv.Itoa(secs), nil)
		resp, err := c.Do(req)
		if err != nil {
			cpu <- nil
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		cpu <- b
	}()
	// The time to the first byte too: what the server does before it
	// writes, apart from writing and the client's reading.
	var times, firsts []time.Duration
	for end := time.Now().Add(time.Duration(secs) * time.Second); time.Now().Before(end); {
		t0 := time.Now()
		var first time.Duration
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotFirstResponseByte: func() { first = time.Since(t0) }})
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+ep, nil)
		req.Header.Set("Authorization", "Token "+token)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %v", ep, resp.Status, err)
		}
		times, firsts = append(times, time.Since(t0)), append(firsts, first)
	}
	prof := <-cpu
	if len(prof) == 0 {
		t.Fatal("no CPU profile")
	}
	allocs := get(t, c, url+"/debug/pprof/allocs", "")
	gcs := strings.Count(srv.Output(), "gc ") - gcBefore
	for name, b := range map[string][]byte{"cpu.pprof": prof, "allocs.pprof": allocs, "gctrace.txt": []byte(srv.Output())} {
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(times)
	slices.Sort(firsts)
	t.Logf("%s: %d calls, p50 %.2f ms, p99 %.2f ms, max %.2f ms (first byte: p50 %.2f ms, p99 %.2f ms), %d GC cycles (%.2f a call); profiles in %s",
		ep, len(times), ms(percentile(times, 50)), ms(percentile(times, 99)), ms(times[len(times)-1]), ms(percentile(firsts, 50)), ms(percentile(firsts, 99)),
		gcs, float64(gcs)/float64(len(times)), out)
}

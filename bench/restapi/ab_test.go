package restapi

import (
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/management/store"

	_ "modernc.org/sqlite" // the driver store registers, for execSQLite
)

// TestABRESTAPI compares this tree's server with another build of it (B,
// e.g. the last commit's, built from `git archive HEAD`) on the same
// dataset (SQLite), calling the list endpoints of both in turn, A then B,
// so that both meet the same load from whatever else the machine runs: on
// a shared box that noise is larger than the difference between runs.
// $WIREMESH_BENCH_AB_BIN is B's netbird-server; $WIREMESH_BENCH_AB_SQL,
// when set, runs on B's store after seeding (say, to drop an index this
// tree added and B does not know).
//
//	WIREMESH_BENCH_AB_BIN=/tmp/old/netbird-server go test -count=1 -v -run TestABRESTAPI ./bench/restapi/
func TestABRESTAPI(t *testing.T) {
	bin := os.Getenv("WIREMESH_BENCH_AB_BIN")
	if bin == "" {
		t.Skip("the A/B comparison runs with WIREMESH_BENCH_AB_BIN=other netbird-server")
	}
	n := envInts(t, "WIREMESH_BENCH_REST_PEERS", []int{10000})[0]
	calls := envInts(t, "WIREMESH_BENCH_REST_CALLS", []int{50})[0]
	d := newDataset(n)
	dirA, dirB := t.TempDir(), t.TempDir()
	tokA := seedOurs(t, store.Config{Engine: store.SQLite, DataDir: dirA}, d)
	tokB := seedOurs(t, store.Config{Engine: store.SQLite, DataDir: dirB}, d)
	if q := os.Getenv("WIREMESH_BENCH_AB_SQL"); q != "" {
		execSQLite(t, dirB, q)
	}
	urlA := startOurs(t, tokA, "--datadir", dirA)
	urlB := startOther(t, bin, tokB, "--datadir", dirB)
	c := &http.Client{Timeout: 5 * time.Minute}
	var b strings.Builder
	fmt.Fprintf(&b, "\nA/B, %d peers, %d calls each, in turn (p50/p99/max in ms)\n%-40s %24s %24s\n", n, calls, "endpoint", "A (this tree)", "B ("+filepath.Base(filepath.Dir(bin))+")")
	for _, ep := range endpoints(d) {
		var ta, tb []time.Duration
		for i := range calls + 2 {
			t0 := time.Now()
			get(t, c, urlA+ep, tokA)
			da := time.Since(t0)
			t0 = time.Now()
			get(t, c, urlB+ep, tokB)
			db := time.Since(t0)
			if i >= 2 {
				ta, tb = append(ta, da), append(tb, db)
			}
		}
		fmt.Fprintf(&b, "%-40s %24s %24s\n", strings.Replace(ep, d.peerID(d.peers/2), "{id}", 1), triple(ta), triple(tb))
	}
	fmt.Print(b.String())
}

func triple(ts []time.Duration) string {
	slices.Sort(ts)
	return fmt.Sprintf("%.1f/%.1f/%.1f", ms(percentile(ts, 50)), ms(percentile(ts, 99)), ms(ts[len(ts)-1]))
}

// startOther runs another build of netbird-server as startOurs runs ours.
func startOther(t *testing.T, bin, token string, storeArgs ...string) string {
	t.Helper()
	port := freePort(t)
	args := append([]string{"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--stun-port", "0", "--disable-relay", "--builtin-idp=false"}, storeArgs...)
	srv := proctest.StartCmd(t, exec.Command(bin, args...), nil)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, url+"/api/users", token, srv, 200)
	return url
}

// execSQLite runs a statement on the SQLite store in dir (with the
// driver itself: the store has no door for raw SQL).
func execSQLite(t *testing.T, dir, q string) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

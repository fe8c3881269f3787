package durability

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/pgtest"
	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/internal/testpeer"
)

// backend is a store selection as command-line arguments.
type backend struct {
	name string
	args []string
}

func backends(t *testing.T) []backend {
	pg := pgtest.Start(t)
	return []backend{
		{"sqlite", []string{"--datadir", t.TempDir()}},
		{"postgres", []string{"--datadir", t.TempDir(), "--store", "postgres", "--store-dsn", pg.DSN("postgres")}},
	}
}

var listening = regexp.MustCompile(`management and signal on (\S+) \(gRPC\)`)

func startServer(t *testing.T, b backend) (*proctest.Proc, string) {
	t.Helper()
	args := append([]string{"--listen", "127.0.0.1:0", "--stun-port", "0", "--log-level", "warn"}, b.args...)
	p := proctest.Start(t, nil, "netbird-server", args...)
	m := p.Wait(t, listening, 30*time.Second)
	return p, m[1]
}

func admin(t *testing.T, b backend, args ...string) string {
	t.Helper()
	out, err := proctest.Run(t, "netbird-server", append(append([]string{"admin"}, b.args...), args...)...)
	if err != nil {
		t.Fatalf("admin %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// acked is a registration the server confirmed.
type acked struct {
	key key.Private
	ip  string
}

// TestCrashDuringRegistrations kills management with SIGKILL while peers
// register as fast as they can, restarts it on the same store, and checks
// that every registration the server acknowledged is there with the
// address it was given, and that nothing is half-written: the setup key
// counts exactly one use per stored peer, and the serial and the activity
// log one step per peer.
func TestCrashDuringRegistrations(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			out := admin(t, b, "setup-keys", "create", "--reusable", "--name", "burst")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			secret := lines[len(lines)-1]
			srv, addr := startServer(t, b)
			conn := dial(t, addr)

			var (
				mu   sync.Mutex
				acks []acked
				wg   sync.WaitGroup
			)
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 0; ctx.Err() == nil; n++ {
						p := testpeer.New(conn, fmt.Sprintf("burst-%d-%d", i, n))
						cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
						resp, err := p.Login(cctx, secret)
						cancel()
						if err != nil {
							// The server is gone: what was not acknowledged may or may not be stored.
							return
						}
						mu.Lock()
						acks = append(acks, acked{p.Priv, resp.GetPeerConfig().GetAddress()})
						mu.Unlock()
					}
				}()
			}
			// Kill once registrations are in full flow.
			deadline := time.Now().Add(20 * time.Second)
			for {
				mu.Lock()
				n := len(acks)
				mu.Unlock()
				if n >= 60 || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			srv.Kill()
			wg.Wait()
			stop()
			if len(acks) < 20 {
				t.Fatalf("only %d registrations before the kill", len(acks))
			}

			_, addr = startServer(t, b)
			var stored []struct {
				ID, IP, Key string
			}
			if err := json.Unmarshal([]byte(admin(t, b, "peers", "list", "--json")), &stored); err != nil {
				t.Fatal(err)
			}
			byKey := map[string]string{}
			for _, p := range stored {
				byKey[p.Key] = p.IP
			}
			for _, a := range acks {
				ip, ok := byKey[a.key.Public().String()]
				if !ok {
					t.Errorf("acknowledged peer %s lost in the crash", a.key.Public())
					continue
				}
				if !strings.HasPrefix(a.ip, ip+"/") {
					t.Errorf("peer %s was given %s but is stored with %s", a.key.Public(), a.ip, ip)
				}
			}
			var keys []struct {
				UsedTimes int `json:"used_times"`
			}
			_ = json.Unmarshal([]byte(admin(t, b, "setup-keys", "list", "--json")), &keys)
			var all []struct {
				Activity string `json:"activity"`
			}
			_ = json.Unmarshal([]byte(admin(t, b, "events", "--limit", "0")), &all)
			var events []string // the key's and the peers' (not the owner's creation)
			for _, e := range all {
				if e.Activity != "user.create" {
					events = append(events, e.Activity)
				}
			}
			if len(keys) != 1 || keys[0].UsedTimes != len(stored) || len(events) != len(stored)+1 {
				t.Fatalf("%d peers stored but the key counts %v uses and the log has %d events (1 for the key)", len(stored), keys, len(events))
			}
			t.Logf("%s: %d acknowledged, %d stored after SIGKILL", b.name, len(acks), len(stored))

			// Every acknowledged peer logs in again, keyless, to the restarted server.
			conn = dial(t, addr)
			for _, a := range acks[:5] {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := testpeer.WithKey(conn, "again", a.key).Login(ctx, "")
				cancel()
				if err != nil || resp.GetPeerConfig().GetAddress() != a.ip {
					t.Fatalf("re-login of %s: %v (address %s, was %s)", a.key.Public(), err, resp.GetPeerConfig().GetAddress(), a.ip)
				}
			}
		})
	}
}

// TestStoreDownAnswersUnavailable: while Postgres is down, logins get
// Unavailable (clients retry it) rather than a hard failure, and the same
// server process serves them again once the database is back.
func TestStoreDownAnswersUnavailable(t *testing.T) {
	pg := pgtest.Start(t)
	b := backend{"postgres", []string{"--datadir", t.TempDir(), "--store", "postgres", "--store-dsn", pg.DSN("postgres")}}
	out := admin(t, b, "setup-keys", "create", "--reusable")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	secret := lines[len(lines)-1]
	_, addr := startServer(t, b)
	conn := dial(t, addr)
	login := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := testpeer.New(conn, "p").Login(ctx, secret)
		return err
	}
	if err := login(); err != nil {
		t.Fatal(err)
	}
	pg.Stop(t)
	if err := login(); status.Code(err) != codes.Unavailable {
		t.Fatalf("login with the database down: %v, want Unavailable", err)
	}
	pg.StartAgain(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := login()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no login after the database came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

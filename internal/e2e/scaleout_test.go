package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
	"github.com/wiremesh/wiremesh/internal/pgtest"
	"github.com/wiremesh/wiremesh/internal/proctest"
)

// Scale-out instances on the public segment: two management instances on
// one Postgres and two signal instances joined through NATS. Agents reach
// them by name (mgmt.test, signal.test), each name listing both instances
// of its service, in an order that differs per agent so the peers spread.
const (
	m1Addr, m2Addr = "10.200.0.2", "10.200.0.3"
	s1Addr, s2Addr = "10.200.0.4", "10.200.0.5"
	natsAddr       = netlab.PubAddr + ":4222"
)

type scaleOut struct {
	m          *Mesh
	dsn, key   string
	mg, sg     [2]*proctest.Proc
	mAddr      [2]string
	sAddr      [2]string
	relaySecrt string
}

func newScaleOut(t *testing.T) *scaleOut {
	m := NewMesh(t) // its embedded STUN serves the instances' agents
	pg := pgtest.Start(t)
	so := &scaleOut{m: m, dsn: pg.NewDatabase(t), mAddr: [2]string{m1Addr, m2Addr}, sAddr: [2]string{s1Addr, s2Addr}, relaySecrt: "scale-out-relay"}
	pub := m.Lab.NS("pub")
	for _, a := range []string{m1Addr, m2Addr, s1Addr, s2Addr} {
		if out, err := m.Lab.Exec(pub, "ip", "addr", "add", a+"/24", "dev", "br0"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	nats := proctest.StartCmd(t, m.Lab.Cmd(pub, proctest.Binary(t, "testnatsd"), "-host", netlab.PubAddr, "-port", "4222"), nil)
	nats.Wait(t, regexp.MustCompile(`NATS ready`), 10*time.Second)
	relay := proctest.StartCmd(t, m.Lab.Cmd(pub, proctest.Binary(t, "netbird-relay"), "-l", splitRelay, "-e", "rel://"+splitRelay, "-s", so.relaySecrt), nil)
	relay.Wait(t, regexp.MustCompile(`listening on`), 10*time.Second)
	for i := range 2 {
		so.start(i)
	}
	out, err := proctest.Run(t, "netbird-mgmt", "admin", "--store", "postgres", "--store-dsn", so.dsn,
		"--store-encryption-key", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", "setup-keys", "create", "--reusable")
	if err != nil {
		t.Fatalf("create key: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	so.key = lines[len(lines)-1]
	return so
}

// start (re)starts signal and management instance i.
func (so *scaleOut) start(i int) {
	t, pub := so.m.t, so.m.Lab.NS("pub")
	so.sg[i] = proctest.StartCmd(t, so.m.Lab.Cmd(pub, proctest.Binary(t, "netbird-signal"), "--insecure-listen", so.sAddr[i]+":10000", "--nats", "nats://"+natsAddr,
		"--metrics-addr", so.sAddr[i]+":"+signalMetricsPort), nil)
	so.sg[i].Wait(t, regexp.MustCompile(`signal gRPC on`), 10*time.Second)
	so.mg[i] = proctest.StartCmd(t, so.m.Lab.Cmd(pub, proctest.Binary(t, "netbird-mgmt"), "--datadir", t.TempDir(),
		"--insecure-listen", so.mAddr[i]+":"+mgmtPort, "--signal", "signal.test:10000", "--stun", "stun:"+netlab.PubAddr+":3478",
		"--relay", "rel://"+splitRelay, "--relay-secret", so.relaySecrt, "--store", "postgres", "--store-dsn", so.dsn,
		"--store-encryption-key", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
		"--metrics-addr", so.mAddr[i]+":"+serverMetricsPort), nil)
	so.mg[i].Wait(t, regexp.MustCompile(`setup-keys create`), 20*time.Second)
}

// waitStreams waits until instance i holds n management and n signal
// streams, and returns how long that took.
func (so *scaleOut) waitStreams(i, n int, within time.Duration) time.Duration {
	t := so.m.t
	start := time.Now()
	for deadline := start.Add(within); ; time.Sleep(100 * time.Millisecond) {
		mg := so.gauge(so.mAddr[i]+":"+serverMetricsPort, "management_sync_streams")
		sg := so.gauge(so.sAddr[i]+":"+signalMetricsPort, "signal_streams")
		if mg == n && sg == n {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %d holds management %d, signal %d streams; want %d and %d", i+1, mg, sg, n, n)
		}
	}
}

// pingsThrough pings ip from a for d in the background; the returned
// function fails the test if any ping was lost.
func (so *scaleOut) pingsThrough(from *Agent, ip string, d time.Duration, what string) func() {
	lost := make(chan string, 1)
	go func() {
		out, _ := so.m.Lab.Exec(from.NS, "ping", "-i", "0.1", "-w", fmt.Sprint(int(d.Seconds())), "-W", "1", ip)
		lost <- out
	}()
	return func() {
		so.m.t.Helper()
		if out := <-lost; !regexp.MustCompile(` 0(\.\d+)?% packet loss`).MatchString(out) {
			so.m.t.Fatalf("%s -> %s lost pings while %s:\n%s", from.Name, ip, what, out)
		}
	}
}

// agent adds a site whose host resolves mgmt.test and signal.test to
// instance first's addresses before the other's.
func (so *scaleOut) agent(name string, first int) *Agent {
	t := so.m.t
	ns := so.m.Lab.NS(name)
	dir := filepath.Join("/etc/netns", ns)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	o := 1 - first
	hosts := fmt.Sprintf("127.0.0.1 localhost\n%s mgmt.test\n%s mgmt.test\n%s signal.test\n%s signal.test\n",
		so.mAddr[first], so.mAddr[o], so.sAddr[first], so.sAddr[o])
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	a := so.m.Agent(name, netlab.Home)
	if out, err := so.m.UpAt(a, "http://mgmt.test:"+mgmtPort, so.key); err != nil || !strings.Contains(out, "Connected") {
		t.Fatalf("%s up: %v\n%s", name, err, out)
	}
	return a
}

// gauge reads one metric of a server on the public segment.
func (so *scaleOut) gauge(addr, name string) int {
	return int(metricOf(so.m.t, so.m.Lab.NS("pub"), addr, name))
}

// metricOf reads one metric of a server reachable from namespace ns.
func metricOf(t *testing.T, ns, addr, name string) float64 {
	t.Helper()
	resp, err := nsClient(ns).Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s at %s", name, addr)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

func (so *scaleOut) streams() (mgmt, signal [2]int) {
	for i := range 2 {
		mgmt[i] = so.gauge(so.mAddr[i]+":"+serverMetricsPort, "management_sync_streams")
		signal[i] = so.gauge(so.sAddr[i]+":"+signalMetricsPort, "signal_streams")
	}
	return
}

// TestScaleOut: 2 management + 2 signal instances with peers spread over
// them form one mesh (signal messages cross instances through NATS, map
// changes through Postgres notifications); then one instance of each is
// killed with SIGKILL, and its peers move to the survivors and keep
// working, and a new peer joins through the survivors.
func TestScaleOut(t *testing.T) {
	so := newScaleOut(t)
	m := so.m
	a, b, c := so.agent("a", 0), so.agent("b", 1), so.agent("c", 0)
	agents := []*Agent{a, b, c}
	ips := map[*Agent]string{}
	for _, x := range agents {
		ips[x] = IPOf(m.Status(x))
	}
	mg, sg := so.streams()
	t.Logf("streams before: management %v, signal %v", mg, sg)
	if mg != [2]int{2, 1} || sg != [2]int{2, 1} {
		t.Fatalf("peers not spread as the name order says: management %v, signal %v", mg, sg)
	}
	for _, x := range agents {
		for _, y := range agents {
			if x != y {
				if _, ok := m.WaitPing(x, ips[y], 20*time.Second); !ok {
					t.Fatalf("%s cannot reach %s across instances", x.Name, y.Name)
				}
			}
		}
	}

	// The tunnels do not depend on the instances: a pings b throughout.
	check := so.pingsThrough(a, ips[b], 10*time.Second, "the instances died")
	time.Sleep(time.Second)
	so.mg[0].Kill()
	so.sg[0].Kill()
	killed := time.Now()
	so.waitStreams(1, 3, 30*time.Second)
	t.Logf("peers of the killed instances back on the survivors %v after the kill", time.Since(killed).Round(time.Millisecond))
	check()
	for _, x := range []*Agent{a, c} {
		if st := m.Status(x); !st.Management.Connected || !st.Signal.Connected {
			t.Fatalf("%s status after the move: %+v", x.Name, st)
		}
	}
	// A new peer that prefers the dead instances joins through the
	// survivors and reaches everyone; everyone reaches it.
	d := so.agent("d", 0)
	ipD := IPOf(m.Status(d))
	for _, x := range agents {
		if _, ok := m.WaitPing(d, ips[x], 20*time.Second); !ok {
			t.Fatalf("new peer cannot reach %s", x.Name)
		}
		if _, ok := m.WaitPing(x, ipD, 20*time.Second); !ok {
			t.Fatalf("%s cannot reach the new peer", x.Name)
		}
	}
	out, err := proctest.Run(t, "netbird-mgmt", "admin", "--store", "postgres", "--store-dsn", so.dsn,
		"--store-encryption-key", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", "peers", "list")
	if err != nil || strings.Count(strings.TrimSpace(out), "\n") != 4 {
		t.Fatalf("peers after the failover (want 4, no duplicates): %v\n%s", err, out)
	}

	// Graceful: the first instances return, the survivors are stopped with
	// SIGTERM; every peer moves back, none loses a ping, and the store
	// shows all of them online at once (no wait for a heartbeat to lapse).
	so.start(0)
	check = so.pingsThrough(b, ips[a], 8*time.Second, "the instances stopped")
	time.Sleep(time.Second)
	so.mg[1].Stop()
	so.sg[1].Stop()
	moved := so.waitStreams(0, 4, 30*time.Second)
	t.Logf("after SIGTERM of the second instances all peers are on the first ones in %v", moved.Round(time.Millisecond))
	check()
	out, err = proctest.Run(t, "netbird-mgmt", "admin", "--store", "postgres", "--store-dsn", so.dsn,
		"--store-encryption-key", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", "peers", "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var ps []struct{ Connected bool }
	if err := json.Unmarshal([]byte(out), &ps); err != nil || len(ps) != 4 {
		t.Fatalf("peers: %v\n%s", err, out)
	}
	for _, p := range ps {
		if !p.Connected {
			t.Fatalf("a peer is shown offline after moving:\n%s", out)
		}
	}
}

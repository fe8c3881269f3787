package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/e2e"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/netlab"
	"github.com/wiremesh/wiremesh/internal/proctest"
)

func requireBench(t *testing.T) {
	if os.Getenv("WIREMESH_BENCH") == "" {
		t.Skip("benchmarks run with WIREMESH_BENCH=1 (bash bench/run.sh)")
	}
}

type iperf struct {
	bps     float64
	retrans int
}

// runIperf measures TCP from ns "from" to addr in ns "to" for secs seconds.
func runIperf(t *testing.T, lab *netlab.Lab, fromNS, toNS, addr string, secs int) iperf {
	srv := proctest.StartCmd(t, lab.Cmd(toNS, "iperf3", "-s", "-1", "-B", addr), nil)
	time.Sleep(300 * time.Millisecond)
	out, err := lab.Exec(fromNS, "iperf3", "-c", addr, "-t", strconv.Itoa(secs), "-J")
	srv.Stop()
	if err != nil {
		t.Fatalf("iperf3 to %s: %v\n%s", addr, err, out)
	}
	var r struct {
		End struct {
			SumSent struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				Retransmits   int     `json:"retransmits"`
			} `json:"sum_sent"`
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("iperf3 json: %v", err)
	}
	return iperf{bps: r.End.SumReceived.BitsPerSecond, retrans: r.End.SumSent.Retransmits}
}

// runIperfUDP sends UDP as fast as it can (1200-byte datagrams, small
// enough for the tunnel's MTU) and returns what arrived and the loss.
func runIperfUDP(t *testing.T, lab *netlab.Lab, fromNS, toNS, addr string, secs int) (bps, lostPct float64) {
	srv := proctest.StartCmd(t, lab.Cmd(toNS, "iperf3", "-s", "-1", "-B", addr), nil)
	time.Sleep(300 * time.Millisecond)
	out, err := lab.Exec(fromNS, "iperf3", "-c", addr, "-u", "-b", "0", "-l", "1200", "-t", strconv.Itoa(secs), "-J")
	srv.Stop()
	if err != nil {
		t.Fatalf("iperf3 -u to %s: %v\n%s", addr, err, out)
	}
	var r struct {
		End struct {
			Sum struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				LostPercent   float64 `json:"lost_percent"`
			} `json:"sum"`
			SumReceived *struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("iperf3 json: %v", err)
	}
	bps = r.End.Sum.BitsPerSecond * (1 - r.End.Sum.LostPercent/100)
	if r.End.SumReceived != nil && r.End.SumReceived.BitsPerSecond > 0 {
		bps = r.End.SumReceived.BitsPerSecond
	}
	return bps, r.End.Sum.LostPercent
}

// pingAvg is the average round trip of 50 pings 20 ms apart.
func pingAvg(t *testing.T, lab *netlab.Lab, fromNS, addr string) time.Duration {
	out, err := lab.Exec(fromNS, "ping", "-c", "50", "-i", "0.02", "-q", addr)
	if err != nil {
		t.Fatalf("ping %s: %v\n%s", addr, err, out)
	}
	m := regexp.MustCompile(`= [\d.]+/([\d.]+)/`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("ping output: %s", out)
	}
	ms, _ := strconv.ParseFloat(m[1], 64)
	return time.Duration(ms * float64(time.Millisecond))
}

func cpuSeconds(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

func rssMB(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(b)
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v / 1024
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func gbps(v float64) string { return fmt.Sprintf("%.2f Gbit/s", v/1e9) }

// TestBenchMesh prints the benchmark report.
func TestBenchMesh(t *testing.T) {
	requireBench(t)
	m := e2e.NewMesh(t)
	a, b, c := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home), m.Agent("c", netlab.Symmetric)
	var report []string
	add := func(f string, args ...any) { report = append(report, fmt.Sprintf(f, args...)); t.Logf(f, args...) }

	m.Up(a)
	ipA := e2e.IPOf(m.Status(a))
	// Time from `up` of a new peer to its first ping reply from an existing one.
	start := m.Up(b)
	ipB := e2e.IPOf(m.Status(b))
	var firstP2P time.Duration
	for !m.Ping(b, ipA) {
		if time.Since(start) > 20*time.Second {
			t.Fatal("b never reached a")
		}
	}
	firstP2P = time.Since(start)
	start = m.Up(c)
	var firstRelay time.Duration
	for !m.Ping(c, ipA) {
		if time.Since(start) > 20*time.Second {
			t.Fatal("c never reached a")
		}
	}
	firstRelay = time.Since(start)
	add("up -> first ping reply, P2P pair (includes registration and interface creation): %v (NetBird v0.77.1: 0.36-1.6 s; target < 1 s P2P)", firstP2P.Round(time.Millisecond))
	add("up -> first ping reply, symmetric-NAT peer via the relay: %v (NetBird v0.77.1 with its relay: 0.4-0.6 s; target < 0.5 s to any path)", firstRelay.Round(time.Millisecond))
	for i := 0; i < 30 && m.ConnType(a, ipB) != "P2P"; i++ {
		time.Sleep(200 * time.Millisecond)
	}

	// Idle memory of an agent with two connected peers.
	time.Sleep(3 * time.Second)
	pidA := a.Daemon.Cmd.Process.Pid
	add("agent idle RSS with 2 peers: %.1f MB (NetBird v0.77.1: 55-61 MB; target <= 30 MB)", rssMB(t, pidA))

	// P2P throughput through the agent, with its CPU cost.
	pidB := b.Daemon.Cmd.Process.Pid
	cpu0 := cpuSeconds(t, pidA) + cpuSeconds(t, pidB)
	t0 := time.Now()
	p2p := runIperf(t, m.Lab, a.NS, b.NS, ipB, 5)
	cpu := cpuSeconds(t, pidA) + cpuSeconds(t, pidB) - cpu0
	cores := cpu / time.Since(t0).Seconds()
	add("P2P TCP through the agent: %s, %d retransmits (%s)", gbps(p2p.bps), p2p.retrans, m.ConnType(a, ipB))
	add("agent CPU: %.2f cores for both ends at %s = %.2f cores per Gbit/s", cores, gbps(p2p.bps), cores/(p2p.bps/1e9))
	p2pUDP, p2pLoss := runIperfUDP(t, m.Lab, a.NS, b.NS, ipB, 5)
	p2pRTT := pingAvg(t, m.Lab, a.NS, ipB)
	add("P2P UDP through the agent: %s arrived (%.1f%% lost at full send rate); ping RTT %v", gbps(p2pUDP), p2pLoss, p2pRTT)

	ipC := e2e.IPOf(m.Status(c))
	relayed := runIperf(t, m.Lab, a.NS, c.NS, ipC, 5)
	add("relayed TCP through the embedded relay (WebSocket): %s, %d retransmits (NetBird's relay: 0.09-0.15 Gbit/s, thousands of retransmits; target >= 5x that, 0.45-0.75)", gbps(relayed.bps), relayed.retrans)
	if out, err := m.Lab.Exec(a.NS, "ping", "-c", "20", "-i", "0.05", "-q", ipC); err == nil {
		if i := strings.Index(out, "rtt "); i >= 0 {
			add("relayed ping %s", strings.TrimSpace(out[i:]))
		}
	}

	// Baselines in the same run: bare path through the NAT, and a plain
	// wireguard-go tunnel between the same two namespaces.
	bare := runIperf(t, m.Lab, a.NS, m.Lab.NS("pub"), netlab.PubAddr, 5)
	bareUDP, _ := runIperfUDP(t, m.Lab, a.NS, m.Lab.NS("pub"), netlab.PubAddr, 5)
	bareRTT := pingAvg(t, m.Lab, a.NS, netlab.PubAddr)
	add("bare path a -> public segment: TCP %s, UDP %s, ping RTT %v", gbps(bare.bps), gbps(bareUDP), bareRTT)
	m.CLI(a, "down")
	m.CLI(b, "down")
	ka, _ := key.NewPrivate()
	kb, _ := key.NewPrivate()
	plain := func(ns, iface, priv, peer, endpoint, addr, allowed string) {
		p := proctest.StartCmd(t, m.Lab.Cmd(ns, proctest.Binary(t, "plainwg"), "-iface", iface, "-private", priv, "-peer", peer,
			"-endpoint", endpoint, "-addr", addr, "-allowed", allowed, "-port", "51900"), nil)
		p.Wait(t, regexp.MustCompile("plainwg up"), 10*time.Second)
	}
	// Home routers keep the source port, so each side's public endpoint is
	// its router's WAN address with the same port; both keepalive at once.
	plain(a.NS, m.Lab.Prefix+"pa", ka.String(), kb.Public().String(), "10.200.0.12:51900", "10.99.0.1/24", "10.99.0.2/32")
	plain(b.NS, m.Lab.Prefix+"pb", kb.String(), ka.Public().String(), "10.200.0.11:51900", "10.99.0.2/24", "10.99.0.1/32")
	if _, ok := m.WaitPing(a, "10.99.0.2", 10*time.Second); !ok {
		t.Fatal("plain wireguard-go baseline did not connect")
	}
	base := runIperf(t, m.Lab, a.NS, b.NS, "10.99.0.2", 5)
	add("plain wireguard-go tunnel, same namespaces: %s, %d retransmits", gbps(base.bps), base.retrans)
	baseUDP, baseLoss := runIperfUDP(t, m.Lab, a.NS, b.NS, "10.99.0.2", 5)
	baseRTT := pingAvg(t, m.Lab, a.NS, "10.99.0.2")
	add("plain wireguard-go tunnel: UDP %s (%.1f%% lost), ping RTT %v", gbps(baseUDP), baseLoss, baseRTT)
	add("RATIO agent P2P / plain wireguard-go: %.2f (NetBird v0.77.1: 0.77-1.08; target >= 1.0)", p2p.bps/base.bps)
	add("RATIO agent P2P / bare path: %.2f", p2p.bps/bare.bps)
	add("RATIO agent P2P UDP / plain wireguard-go UDP: %.2f; / bare path UDP: %.2f", p2pUDP/baseUDP, p2pUDP/bareUDP)
	add("RATIO agent P2P ping RTT / plain wireguard-go RTT: %.2f; / bare path RTT: %.2f", float64(p2pRTT)/float64(baseRTT), float64(p2pRTT)/float64(bareRTT))
	add("RATIO relayed / NetBird relay upper figure (0.15 Gbit/s): %.1f", relayed.bps/0.15e9)
	appendReport(t, report)
}

// appendReport adds lines to the report file bench/run.sh prints.
func appendReport(t *testing.T, lines []string) {
	out := os.Getenv("WIREMESH_BENCH_REPORT")
	if out == "" {
		return
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
}

package bench

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/e2e"
	"github.com/wiremesh/wiremesh/internal/netlab"
	"github.com/wiremesh/wiremesh/internal/proctest"
)

// Ports the bench policy opens from a to b besides SSH's 22: iperf3's
// and the Go TCP baseline's.
const (
	sshBenchIperfPort = "5201"
	sshBenchSinkPort  = "5202"
	sshBenchRuns      = 20
	sshBenchFileSize  = 256 << 20
)

// TestBenchSSH measures SSH over the mesh against the tunnel it runs in,
// in the same run: session setup time of `netbird ssh b true` and of
// plain OpenSSH through `netbird ssh-config` (median and p95 of 20) beside
// a TCP connect + first byte over the same tunnel, and the throughput of
// copying a 256 MiB file a -> b (OpenSSH scp, which speaks SFTP, and
// `netbird ssh b 'cat > file'`) as a ratio to iperf3 and to a Go TCP
// sink over the same tunnel. b serves SSH (--allow-server-ssh,
// ssh_enabled) and the only policy lets group A reach B on tcp/22 (and
// the two baseline ports).
func TestBenchSSH(t *testing.T) {
	requireBench(t)
	m := e2e.NewMesh(t)
	a, b := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home)
	m.Up(a)
	// The mesh's management URL (internal/e2e's mgmtPort).
	url := "http://" + netlab.PubAddr + ":33073"
	if out, err := m.UpAt(b, url, m.Key, "--allow-server-ssh", "--enable-ssh-root"); err != nil || !strings.Contains(out, "Connected") {
		t.Fatalf("b: up: %v\n%s", err, out)
	}
	api := m.OwnerAPI(t)
	idA, idB := api.IDOf("/api/peers", "a"), api.IDOf("/api/peers", "b")
	api.Call("PUT", "/api/peers/"+idB, map[string]any{"name": "b", "ssh_enabled": true}, 200)
	ga := api.Call("POST", "/api/groups", map[string]any{"name": "A", "peers": []string{idA}}, 200)["id"].(string)
	gb := api.Call("POST", "/api/groups", map[string]any{"name": "B", "peers": []string{idB}}, 200)["id"].(string)
	api.Call("POST", "/api/policies", map[string]any{"name": "ssh", "enabled": true, "rules": []map[string]any{{
		"name": "ssh", "enabled": true, "action": "accept", "bidirectional": false, "protocol": "tcp",
		"ports": []string{"22", sshBenchIperfPort, sshBenchSinkPort}, "sources": []string{ga}, "destinations": []string{gb}}}}, 200)
	api.Call("DELETE", "/api/policies/"+api.IDOf("/api/policies", "Default"), nil, 200)
	ipB := e2e.IPOf(m.Status(b))

	netbird := func(args ...string) *exec.Cmd {
		c := m.Lab.Cmd(a.NS, append([]string{proctest.Binary(t, "netbird"), "--daemon-addr", a.Sock}, args...)...)
		c.Env = append(os.Environ(), "NB_STATE_DIR="+a.Dir)
		return c
	}
	// b's server starts once its map enables SSH and a's map lists b's key.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		out, err := netbird("ssh", "root@b", "true").CombinedOutput()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a -> b: %v\n%s", err, out)
		}
	}
	for i := 0; i < 30 && m.ConnType(a, ipB) != "P2P"; i++ {
		time.Sleep(200 * time.Millisecond)
	}
	conn := m.ConnType(a, ipB)
	cfgOut, err := netbird("ssh-config", "--short-names", "--identity-file", filepath.Join(a.Dir, "ssh_key")).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh-config: %v\n%s", err, cfgOut)
	}
	cfg := filepath.Join(a.Dir, "ssh_config")
	if err := os.WriteFile(cfg, cfgOut, 0o600); err != nil {
		t.Fatal(err)
	}
	openssh := func(bin string, args ...string) *exec.Cmd {
		c := m.Lab.Cmd(a.NS, append([]string{bin, "-F", cfg, "-o", "BatchMode=yes"}, args...)...)
		c.Env = append(os.Environ(), "NB_STATE_DIR="+a.Dir)
		return c
	}

	var report []string
	add := func(f string, args ...any) { report = append(report, fmt.Sprintf(f, args...)); t.Logf(f, args...) }

	// (a) Session setup. The runs of each kind are interleaved so that a
	// slow moment of the machine hits all of them.
	sink := tcpSink(t, b.NS, ipB+":"+sshBenchSinkPort)
	var nbSSH, plainSSH, tcpFirst, spawn []time.Duration
	timed := func(c *exec.Cmd) time.Duration {
		t0 := time.Now()
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c.Args, " "), err, out)
		}
		return time.Since(t0)
	}
	for range sshBenchRuns {
		nbSSH = append(nbSSH, timed(netbird("ssh", "root@b", "true")))
		plainSSH = append(plainSSH, timed(openssh("ssh", "-l", "root", "b", "true")))
		tcpFirst = append(tcpFirst, sink.firstByte(t, a.NS))
		spawn = append(spawn, timed(m.Lab.Cmd(a.NS, "true")))
	}
	add("ssh: session setup a -> b (%s), %d runs each, median / p95:", conn, sshBenchRuns)
	add("ssh:   `netbird ssh b true` (process start, map from the daemon, TCP, handshake, exec, exit): %v / %v", median(nbSSH).Round(time.Millisecond), p95(nbSSH).Round(time.Millisecond))
	add("ssh:   OpenSSH `ssh b true` through `netbird ssh-config` (ProxyCommand `netbird ssh proxy`, KnownHostsCommand): %v / %v", median(plainSSH).Round(time.Millisecond), p95(plainSSH).Round(time.Millisecond))
	add("ssh:   baseline TCP connect + first byte over the same tunnel (in process): %v / %v; starting `true` in the namespace: %v / %v",
		median(tcpFirst).Round(10*time.Microsecond), p95(tcpFirst).Round(10*time.Microsecond), median(spawn).Round(100*time.Microsecond), p95(spawn).Round(100*time.Microsecond))
	add("RATIO ssh session setup / TCP connect + first byte (median): netbird ssh %.0f, OpenSSH %.0f", float64(median(nbSSH))/float64(median(tcpFirst)), float64(median(plainSSH))/float64(median(tcpFirst)))

	// (b) Copy throughput: a 256 MiB file a -> b, the copies alternated
	// with the baselines over the same tunnel. Beside each rate: the CPU
	// it cost per GB on each side, the client's processes (scp and the
	// ssh and `netbird ssh proxy` it runs, or `netbird ssh`) and b's agent
	// with the children it reaped (sftp-server, cat).
	payload := make([]byte, sshBenchFileSize)
	_, _ = rand.Read(payload)
	want := sha256.Sum256(payload)
	src := filepath.Join(a.Dir, "ssh-bench-src")
	if err := os.WriteFile(src, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	dstDir := t.TempDir()
	pidB := b.Daemon.Cmd.Process.Pid
	const fileGB = sshBenchFileSize / 1e9
	// The copies, in the order they are reported.
	type copyRun struct {
		what                      string
		bps, clientCPU, serverCPU float64
	}
	runs := map[string]*copyRun{
		"scp":    {what: "OpenSSH scp (SFTP) through ssh-config"},
		"nb cat": {what: "`netbird ssh b 'cat > file'`"},
		"chacha": {what: "OpenSSH `ssh b 'cat > /dev/null'`, chacha20-poly1305 (OpenSSH's first choice)"},
		"gcm":    {what: "OpenSSH `ssh b 'cat > /dev/null'`, aes128-gcm"},
		"sink":   {what: "baseline: Go TCP sink over the same tunnel, same 256 MiB"},
	}
	order := []string{"scp", "nb cat", "chacha", "gcm", "sink"}
	const rounds = 2
	// copyTo runs c with the file on its stdin; dst, if set, is checked
	// to hold the file afterwards.
	copyTo := func(name string, c *exec.Cmd, dst string) {
		f, err := os.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		c.Stdin = f
		cpuB := cpuTree(t, pidB)
		took := timed(c)
		r := runs[name]
		r.serverCPU += (cpuTree(t, pidB) - cpuB) / fileGB / rounds
		r.clientCPU += (c.ProcessState.UserTime() + c.ProcessState.SystemTime()).Seconds() / fileGB / rounds
		r.bps += sshBenchFileSize * 8 / took.Seconds() / rounds
		if dst != "" {
			got, err := os.ReadFile(dst)
			if err != nil || sha256.Sum256(got) != want {
				t.Fatalf("%s: %d of %d bytes arrived intact (%v)", name, len(got), sshBenchFileSize, err)
			}
			_ = os.Remove(dst)
		}
	}
	var iperfBps float64
	for range rounds {
		dst := filepath.Join(dstDir, "copy")
		copyTo("scp", openssh("scp", "-q", src, "root@b:"+dst), dst)
		copyTo("nb cat", netbird("ssh", "root@b", "cat > "+dst), dst)
		// The same bytes as a plain stream (no SFTP), with OpenSSH's
		// first choice of cipher and with AES-GCM.
		copyTo("chacha", openssh("ssh", "-c", "chacha20-poly1305@openssh.com", "-l", "root", "b", "cat > /dev/null"), "")
		copyTo("gcm", openssh("ssh", "-c", "aes128-gcm@openssh.com", "-l", "root", "b", "cat > /dev/null"), "")

		iperfBps += runIperf(t, m.Lab, a.NS, b.NS, ipB, 4).bps / rounds
		cpuB := cpuTree(t, pidB)
		r := runs["sink"]
		r.bps += sink.send(t, a.NS, payload) / rounds
		r.serverCPU += (cpuTree(t, pidB) - cpuB) / fileGB / rounds
	}
	add("ssh: copy 256 MiB a -> b (%s), mean of %d; CPU-seconds per GB: client processes / b's agent (with its sftp-server or cat)", conn, rounds)
	for _, n := range order {
		r := runs[n]
		client := fmt.Sprintf("%.2f", r.clientCPU)
		if n == "sink" {
			client = "-"
		}
		add("ssh:   %s: %s; CPU %s / %.2f", r.what, gbps(r.bps), client, r.serverCPU)
	}
	add("ssh:   baseline: iperf3 over the same tunnel: %s", gbps(iperfBps))
	scp, cat := runs["scp"].bps, runs["nb cat"].bps
	add("RATIO scp / iperf3: %.2f, / TCP sink: %.2f; netbird ssh cat / iperf3: %.2f, / TCP sink: %.2f", scp/iperfBps, scp/runs["sink"].bps, cat/iperfBps, cat/runs["sink"].bps)
	appendReport(t, report)
}

// cpuTree is the CPU time of pid and of the children it has reaped.
func cpuTree(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	var sum float64
	for _, v := range strings.Fields(s[strings.LastIndexByte(s, ')')+2:])[11:15] { // utime stime cutime cstime
		n, _ := strconv.ParseFloat(v, 64)
		sum += n
	}
	return sum / 100 // USER_HZ
}

// p95 is the 95th percentile (nearest rank).
func p95(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)*95+99)/100-1]
}

// sshBenchSink is a TCP listener in b's namespace on b's overlay address:
// it greets each connection with one byte (the first-byte baseline) and
// then reads and discards until EOF (the throughput baseline).
type sshBenchSink struct {
	addr string
	got  chan int64 // bytes read by each connection, once it ends
}

func tcpSink(t *testing.T, ns, addr string) *sshBenchSink {
	var ln net.Listener
	if err := netlab.Do(ns, func() error {
		var err error
		ln, err = net.Listen("tcp4", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s := &sshBenchSink{addr: addr, got: make(chan int64, 1)}
	done, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(90 * time.Second)) // a failed test may leave its end open
			_, _ = c.Write([]byte{1})
			n, _ := io.Copy(io.Discard, c)
			c.Close()
			select {
			case s.got <- n:
			case <-stop: // the test failed before reading it
				return
			}
		}
	}()
	t.Cleanup(func() { close(stop); ln.Close(); <-done })
	return s
}

func (s *sshBenchSink) dial(t *testing.T, ns string) net.Conn {
	var c net.Conn
	if err := netlab.Do(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp4", s.addr, 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return c
}

// firstByte is the time from dialing to reading the greeting.
func (s *sshBenchSink) firstByte(t *testing.T, ns string) time.Duration {
	t0 := time.Now()
	c := s.dial(t, ns)
	defer c.Close()
	var one [1]byte
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, one[:]); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	c.Close() // the sink's EOF
	if n := <-s.got; n != 0 {
		t.Fatalf("sink read %d bytes of a connection that sent none", n)
	}
	return took
}

// send writes data and returns the rate at which the sink read all of it.
func (s *sshBenchSink) send(t *testing.T, ns string, data []byte) float64 {
	c := s.dial(t, ns)
	defer c.Close()
	var one [1]byte
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := io.ReadFull(c, one[:]); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if _, err := io.Copy(c, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	n := <-s.got
	took := time.Since(t0)
	if n != int64(len(data)) {
		t.Fatalf("sink read %d of %d bytes", n, len(data))
	}
	return float64(n) * 8 / took.Seconds()
}

package wg

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"
	"golang.zx2c4.com/wireguard/tun"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/netlab"
)

// TestExternal drives two WireGuard interfaces it does not run itself
// exactly as kernel WireGuard is driven (wgctrl, the agent's own socket,
// a loopback proxy per peer). This machine has no kernel WireGuard, so
// the interfaces are wireguard-go devices serving the same configuration
// interface (UAPI), each in its own process and namespace: ping crosses
// the tunnel, statistics come back through wgctrl, and a removed peer is
// unreachable.
func TestExternal(t *testing.T) { testExternal(t, "uapi") }

// TestKernel is the same on kernel WireGuard, created by the agent; it is
// skipped where the kernel has none (as on the machines CI runs on).
func TestKernel(t *testing.T) { testExternal(t, "kernel") }

func testExternal(t *testing.T, mode string) {
	l := netlab.New(t)
	nsA, nsB, ipA, ipB := l.Pair("a", "b")
	ka, _ := key.NewPrivate()
	kb, _ := key.NewPrivate()
	const port = 51900
	overA, overB := netip.MustParseAddr("100.70.0.1"), netip.MustParseAddr("100.70.0.2")
	a := startExternal(t, l, mode, nsA, l.Prefix+"xa", ka, kb.Public(), overA, overB, netip.AddrPortFrom(ipB, port), port)
	b := startExternal(t, l, mode, nsB, l.Prefix+"xb", kb, ka.Public(), overB, overA, netip.AddrPortFrom(ipA, port), port)

	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := l.Exec(nsA, "ping", "-c", "1", "-W", "1", overB.String()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ping through the external interfaces\na: %s\nb: %s", a.output(), b.output())
		}
	}
	if _, err := l.Exec(nsB, "ping", "-c", "1", "-W", "1", overA.String()); err != nil {
		t.Fatal("b cannot ping a")
	}
	if st := a.cmd("stats"); !strings.Contains(st, "handshake=true") || strings.Contains(st, "rx=0 ") {
		t.Fatalf("a's stats through wgctrl: %q", st)
	}
	a.cmd("remove")
	if _, err := l.Exec(nsB, "ping", "-c", "1", "-W", "1", overA.String()); err == nil {
		t.Fatal("b still reaches a after a removed it")
	}
	a.stop(t)
	b.stop(t)
	if _, err := l.Exec(nsA, "ip", "link", "show", l.Prefix+"xa"); err == nil {
		t.Fatal("the interface outlived Close")
	}
}

type helper struct {
	c   *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	log syncBuffer
}

func (h *helper) output() string { return h.log.String() }

// syncBuffer is the helper's stderr: written by exec's copying goroutine
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// cmd sends one command and returns its one-line answer.
func (h *helper) cmd(s string) string {
	fmt.Fprintln(h.in, s)
	line, _ := h.out.ReadString('\n')
	return strings.TrimSpace(line)
}

func (h *helper) stop(t *testing.T) {
	h.in.Close()
	done := make(chan error, 1)
	go func() { done <- h.c.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("helper: %v", err)
		}
	case <-time.After(10 * time.Second):
		_ = h.c.Process.Kill()
		t.Error("helper did not stop")
	}
}

func startExternal(t *testing.T, l *netlab.Lab, mode, ns, name string, priv key.Private, peer key.Public, self, other netip.Addr, endpoint netip.AddrPort, port int) *helper {
	t.Helper()
	c := l.Cmd(ns, os.Args[0], "-test.run=^TestExternalHelper$")
	c.Env = append(os.Environ(), "WGEXT_HELPER="+strings.Join([]string{mode, name, hex.EncodeToString(priv[:]), peer.String(), self.String(), other.String(), endpoint.String(), fmt.Sprint(port)}, ","))
	h := &helper{c: c}
	c.Stderr = &h.log
	var err error
	if h.in, err = c.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	h.out = bufio.NewReader(stdout)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	line, _ := h.out.ReadString('\n')
	if strings.TrimSpace(line) == "nokernel" {
		t.Skipf("no kernel WireGuard here (%s)", strings.TrimSpace(h.log.String()))
	}
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("helper in %s: %q\n%s", ns, line, h.log.String())
	}
	return h
}

// TestExternalHelper is the helper process (run by TestExternal): an
// interface served by wireguard-go through UAPI, taken over by External.
func TestExternalHelper(t *testing.T) {
	spec := os.Getenv("WGEXT_HELPER")
	if spec == "" {
		t.Skip("helper process of TestExternal")
	}
	f := strings.Split(spec, ",")
	mode := f[0]
	f = f[1:]
	name := f[0]
	raw, _ := hex.DecodeString(f[1])
	var priv key.Private
	copy(priv[:], raw)
	peer, _ := key.ParsePublic(f[2])
	self, other := netip.MustParseAddr(f[3]), netip.MustParseAddr(f[4])
	var port int
	fmt.Sscan(f[6], &port)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))

	var x *External
	if mode == "kernel" {
		var err error
		x, err = NewKernel(Config{Name: name, Private: priv, Port: port}, log)
		if errors.Is(err, ErrNoKernel) {
			fmt.Fprintln(os.Stderr, err)
			fmt.Println("nokernel")
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	} else {
		x = uapiDevice(t, name, priv, port, log)
	}
	if err := x.SetAddress(netip.PrefixFrom(self, 16), 1280); err != nil {
		t.Fatal(err)
	}
	if err := x.SetPeer(Peer{Key: peer, AllowedIPs: []netip.Prefix{netip.PrefixFrom(other, 32)}, Endpoint: f[5], Keepalive: time.Second}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "stats":
			st, err := x.PeerStats()
			s := st[peer]
			fmt.Printf("handshake=%v rx=%d tx=%d endpoint=%s err=%v\n", !s.LastHandshake.IsZero(), s.RxBytes, s.TxBytes, s.Endpoint, err)
		case "remove":
			fmt.Println(x.RemovePeer(peer))
		}
	}
	x.Close()
}

// uapiDevice is an interface served by wireguard-go through UAPI (what
// wgctrl talks to when the kernel has no WireGuard), taken over by
// External.
func uapiDevice(t *testing.T, name string, priv key.Private, port int, log *slog.Logger) *External {
	td, err := tun.CreateTUN(name, 1280)
	if err != nil {
		t.Fatal(err)
	}
	dev := device.NewDevice(td, conn.NewStdNetBind(), device.NewLogger(device.LogLevelError, "wg: "))
	uf, err := ipc.UAPIOpen(name)
	if err != nil {
		t.Fatal(err)
	}
	ul, err := ipc.UAPIListen(name, uf)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ul.Accept()
			if err != nil {
				return
			}
			go dev.IpcHandle(c)
		}
	}()
	x, err := NewExternal(Config{Name: name, Private: priv, Port: port}, func() error { ul.Close(); dev.Close(); return nil }, log)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

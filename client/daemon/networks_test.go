package daemon

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/client/engine"
	"github.com/wiremesh/wiremesh/client/routes"
	"github.com/wiremesh/wiremesh/client/state"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// keyServer is the part of a management server the daemon asks before it
// starts a session: its key (pinned at first login).
type keyServer struct {
	mgmtpb.UnimplementedManagementServiceServer
	pub key.Public
}

func (k keyServer) GetServerKey(context.Context, *mgmtpb.Empty) (*mgmtpb.ServerKeyResponse, error) {
	return &mgmtpb.ServerKeyResponse{Key: k.pub.String()}, nil
}

func startKeyServer(t *testing.T) string {
	t.Helper()
	priv, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	mgmtpb.RegisterManagementServiceServer(g, keyServer{pub: priv.Public()})
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return "http://" + ln.Addr().String()
}

// fakeEngine stands in for the engine's route side: it offers routes and
// keeps the selection with the real selection logic of client/routes,
// without a TUN device or a network map.
type fakeEngine struct {
	opts engine.Options
	gw   key.Public

	mu      sync.Mutex
	offered []routes.Route
	sel     routes.Selection
	stopped bool
	// sshKey is the key RotateSSHKey applied; rotateErr makes it fail.
	sshKey    ed25519.PrivateKey
	rotateErr error
}

func (f *fakeEngine) Stop()                        { f.mu.Lock(); f.stopped = true; f.mu.Unlock() }
func (f *fakeEngine) isStopped() bool              { f.mu.Lock(); defer f.mu.Unlock(); return f.stopped }
func (f *fakeEngine) Logout(context.Context) error { return nil }
func (f *fakeEngine) Status() engine.Status {
	return engine.Status{MgmtConnected: true, Peers: []engine.PeerStatus{{Key: f.gw, FQDN: "gw.netbird.cloud", IP: "100.64.0.9"}},
		Served: []netip.Prefix{netip.MustParsePrefix("172.20.0.0/16")}}
}

func (f *fakeEngine) Networks() []engine.Network {
	f.mu.Lock()
	defer f.mu.Unlock()
	groups := routes.Groups(f.offered)
	active := f.sel.Active(groups)
	var out []engine.Network
	for _, g := range groups {
		r := g.Routes[0]
		n := engine.Network{ID: g.NetID, Range: r.Prefix.String(), Domains: r.Domains, Selected: active[g.ID], ExitNode: g.Exit(), Peers: []string{"gw.netbird.cloud"}}
		if r.IsDomain() {
			n.Range = ""
			n.ResolvedIPs = map[string][]string{r.Domains[0]: {"10.1.0.5"}}
		}
		if n.Selected {
			n.Chosen = "gw.netbird.cloud"
		}
		out = append(out, n)
	}
	return out
}

func (f *fakeEngine) sets() (known, exits map[string]bool) {
	known, exits = map[string]bool{}, map[string]bool{}
	for _, r := range f.offered {
		known[r.NetID] = true
		if r.IsExitNode() {
			exits[r.NetID] = true
		}
	}
	return known, exits
}

func (f *fakeEngine) SelectNetworks(ids []string, appendSel, all bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	known, exits := f.sets()
	s, err := f.sel.Select(ids, appendSel, all, known, exits)
	if err != nil {
		return err
	}
	f.sel = s
	return nil
}

func (f *fakeEngine) DeselectNetworks(ids []string, all bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	known, _ := f.sets()
	s, err := f.sel.Deselect(ids, all, known)
	if err != nil {
		return err
	}
	f.sel = s
	return nil
}

func (f *fakeEngine) RouteSelection() engine.RouteSelection {
	f.mu.Lock()
	defer f.mu.Unlock()
	return engine.RouteSelection{Selected: f.sel.Selected, Deselected: f.sel.Deselected, AllDeselected: f.sel.AllDeselected}
}

// daemonRig runs a real daemon (gRPC on a unix socket, profiles on disk)
// whose sessions are fakeEngines offering the same routes.
type daemonRig struct {
	t    *testing.T
	dir  string
	gw   key.Public
	mu   sync.Mutex
	engs []*fakeEngine
}

func newRig(t *testing.T) *daemonRig {
	// A short directory: unix socket paths are limited to ~100 bytes.
	dir, err := os.MkdirTemp("", "nbnet")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	gw, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	return &daemonRig{t: t, dir: dir, gw: gw.Public()}
}

func (r *daemonRig) offered() []routes.Route {
	return []routes.Route{
		{ID: "r1", NetID: "office", Prefix: netip.MustParsePrefix("10.10.0.0/16"), Peer: r.gw},
		{ID: "r2", NetID: "lab", Prefix: netip.MustParsePrefix("192.168.50.0/24"), Peer: r.gw},
		{ID: "r3", NetID: "exit-eu", Prefix: netip.MustParsePrefix("0.0.0.0/0"), Peer: r.gw, SkipAutoApply: true},
		{ID: "r4", NetID: "exit-us", Prefix: netip.MustParsePrefix("0.0.0.0/0"), Peer: r.gw, SkipAutoApply: true},
		{ID: "r5", NetID: "wiki", Domains: []string{"wiki.corp"}, Peer: r.gw},
	}
}

// start runs a daemon until the returned stop is called (or the test
// ends) and returns a client of it.
func (r *daemonRig) start() (daemonpb.DaemonServiceClient, func()) {
	t := r.t
	s := New("test", slog.New(slog.DiscardHandler), Options{StateDir: r.dir})
	s.startEngine = func(_ context.Context, o engine.Options) (session, error) {
		f := &fakeEngine{opts: o, gw: r.gw, offered: r.offered(),
			sel: routes.Selection{Selected: o.RouteSelection.Selected, Deselected: o.RouteSelection.Deselected, AllDeselected: o.RouteSelection.AllDeselected}}
		r.mu.Lock()
		r.engs = append(r.engs, f)
		r.mu.Unlock()
		return f, nil
	}
	sock := filepath.Join(r.dir, "d.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, "unix://"+sock) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			conn.Close()
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve = %v", err)
			}
		})
	}
	t.Cleanup(stop)
	c := daemonpb.NewDaemonServiceClient(conn)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := c.GetActiveProfile(context.Background(), &daemonpb.GetActiveProfileRequest{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon does not answer")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c, stop
}

func (r *daemonRig) started() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.engs)
}

func (r *daemonRig) last() *fakeEngine {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.engs) == 0 {
		return nil
	}
	return r.engs[len(r.engs)-1]
}

// noLeaks fails the test if goroutines it started outlive it (checked
// after every other cleanup: the daemons and the key server).
func noLeaks(t *testing.T) {
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				t.Errorf("%d goroutines left (%d before):\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// selected lists the IDs ListNetworks reports selected.
func selected(t *testing.T, c daemonpb.DaemonServiceClient) []string {
	t.Helper()
	resp, err := c.ListNetworks(context.Background(), &daemonpb.ListNetworksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range resp.GetRoutes() {
		if n.GetSelected() {
			out = append(out, n.GetID())
		}
	}
	return out
}

// TestNetworksRPC: list, select, deselect through the daemon's gRPC API;
// bad requests change nothing and say why; the selection is saved in the
// profile and a restarted daemon starts its engine with it.
func TestNetworksRPC(t *testing.T) {
	noLeaks(t)
	ctx := context.Background()
	r := newRig(t)
	mgmt := startKeyServer(t)
	c, stop := r.start()

	if _, err := c.ListNetworks(ctx, &daemonpb.ListNetworksRequest{}); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "netbird up") {
		t.Fatalf("ListNetworks while down = %v, want FailedPrecondition naming netbird up", err)
	}
	// The profile as a login leaves it (a login needs the whole
	// management API; the key server answers what Up asks).
	cfg, err := state.Load(filepath.Join(r.dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ManagementURL = mgmt
	if err := state.Save(filepath.Join(r.dir, "config.json"), cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Up(ctx, &daemonpb.UpRequest{}); err != nil {
		t.Fatalf("Up: %v", err)
	}

	// The official order: domains first, then the widest networks.
	resp, err := c.ListNetworks(ctx, &daemonpb.ListNetworksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range resp.GetRoutes() {
		ids = append(ids, n.GetID())
	}
	if d := cmp.Diff([]string{"wiki", "exit-eu", "exit-us", "office", "lab"}, ids); d != "" {
		t.Errorf("order (-want +got):\n%s", d)
	}
	for _, n := range resp.GetRoutes() {
		switch n.GetID() {
		case "exit-eu":
			if !n.GetExitNode() || n.GetSelected() || n.GetChosen() != "" {
				t.Errorf("exit-eu = %v: want an exit node, not selected (management does not apply it)", n)
			}
		case "office":
			if !n.GetSelected() || n.GetRange() != "10.10.0.0/16" || n.GetChosen() != "gw.netbird.cloud" || len(n.GetPeers()) != 1 {
				t.Errorf("office = %v: want selected through gw.netbird.cloud", n)
			}
		case "wiki":
			if got := n.GetResolvedIPs()["wiki.corp"].GetIps(); len(got) != 1 || got[0] != "10.1.0.5" || n.GetDomains()[0] != "wiki.corp" {
				t.Errorf("wiki = %v", n)
			}
		}
	}

	// Errors change nothing.
	before := selected(t, c)
	for _, tc := range []struct {
		name string
		call func() error
		code codes.Code
		says string
	}{
		{"unknown", func() error {
			_, err := c.SelectNetworks(ctx, &daemonpb.SelectNetworksRequest{NetworkIDs: []string{"office", "nope"}})
			return err
		}, codes.NotFound, "no network nope: this peer is offered exit-eu, exit-us, lab, office, wiki"},
		{"unknown deselect", func() error {
			_, err := c.DeselectNetworks(ctx, &daemonpb.SelectNetworksRequest{NetworkIDs: []string{"gone"}})
			return err
		}, codes.NotFound, "no network gone"},
		{"none", func() error {
			_, err := c.SelectNetworks(ctx, &daemonpb.SelectNetworksRequest{})
			return err
		}, codes.InvalidArgument, "name at least one network"},
		{"two exit nodes", func() error {
			_, err := c.SelectNetworks(ctx, &daemonpb.SelectNetworksRequest{NetworkIDs: []string{"exit-eu", "exit-us"}, Append: true})
			return err
		}, codes.InvalidArgument, "only one exit node"},
	} {
		err := tc.call()
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.says) {
			t.Errorf("%s: err = %v, want %v saying %q", tc.name, err, tc.code, tc.says)
		}
		if d := cmp.Diff(before, selected(t, c)); d != "" {
			t.Errorf("%s changed the selection (-before +after):\n%s", tc.name, d)
		}
	}

	steps := []struct {
		name     string
		deselect bool
		req      *daemonpb.SelectNetworksRequest
		want     []string
	}{
		{"replace", false, &daemonpb.SelectNetworksRequest{NetworkIDs: []string{"office"}}, []string{"office"}},
		{"append exit node", false, &daemonpb.SelectNetworksRequest{NetworkIDs: []string{"exit-eu", "wiki"}, Append: true}, []string{"wiki", "exit-eu", "office"}},
		{"another exit node replaces it", false, &daemonpb.SelectNetworksRequest{NetworkIDs: []string{"exit-us"}, Append: true}, []string{"wiki", "exit-us", "office"}},
		{"deselect", true, &daemonpb.SelectNetworksRequest{NetworkIDs: []string{"wiki"}}, []string{"exit-us", "office"}},
		{"deselect all", true, &daemonpb.SelectNetworksRequest{All: true}, nil},
		{"select all", false, &daemonpb.SelectNetworksRequest{All: true}, []string{"wiki", "office", "lab"}},
		{"final", false, &daemonpb.SelectNetworksRequest{NetworkIDs: []string{"exit-eu", "lab"}}, []string{"exit-eu", "lab"}},
	}
	for _, st := range steps {
		var err error
		if st.deselect {
			_, err = c.DeselectNetworks(ctx, st.req)
		} else {
			_, err = c.SelectNetworks(ctx, st.req)
		}
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if d := cmp.Diff(st.want, selected(t, c)); d != "" {
			t.Errorf("%s: selected (-want +got):\n%s", st.name, d)
		}
	}

	// The status names the exit node in use and what each peer routes.
	sr, err := c.Status(ctx, &daemonpb.StatusRequest{GetFullPeerStatus: true})
	if err != nil {
		t.Fatal(err)
	}
	lp := sr.GetFullStatus().GetLocalPeerState()
	if lp.GetExitNode() != "exit-eu" || lp.GetExitNodePeer() != "gw.netbird.cloud" {
		t.Errorf("status exit node = %q via %q, want exit-eu via gw.netbird.cloud", lp.GetExitNode(), lp.GetExitNodePeer())
	}
	if got := sr.GetFullStatus().GetPeers()[0].GetNetworks(); !cmp.Equal(got, []string{"0.0.0.0/0", "192.168.50.0/24"}) {
		t.Errorf("gw networks = %v", got)
	}
	if got := lp.GetNetworks(); !cmp.Equal(got, []string{"172.20.0.0/16"}) {
		t.Errorf("local peer networks (served) = %v", got)
	}
	rev := sr.GetFullStatus().GetNetworksRevision()
	if _, err := c.DeselectNetworks(ctx, &daemonpb.SelectNetworksRequest{NetworkIDs: []string{"lab"}}); err != nil {
		t.Fatal(err)
	}
	sr, _ = c.Status(ctx, &daemonpb.StatusRequest{})
	if sr.GetFullStatus().GetNetworksRevision() == rev {
		t.Error("networksRevision did not change with the selection")
	}
	want := []string{"exit-eu"}

	// A new daemon on the same state brings the profile up again with
	// the saved selection.
	stop()
	if e := r.last(); !e.isStopped() {
		t.Error("the engine was not stopped with the daemon")
	}
	c, _ = r.start()
	deadline := time.Now().Add(10 * time.Second)
	for r.started() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the restarted daemon did not bring the profile up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	o := r.last().opts.RouteSelection
	if !o.AllDeselected || !cmp.Equal(o.Selected, []string{"exit-eu"}) {
		t.Errorf("engine started with selection %+v, want exit-eu only", o)
	}
	if d := cmp.Diff(want, selected(t, c)); d != "" {
		t.Errorf("after restart, selected (-want +got):\n%s", d)
	}
}

// officialCLI is NetBird's own CLI (bash scripts/netbird-official.sh
// builds it), or "" when it is not built.
func officialCLI() string {
	if p := os.Getenv("NB_OFFICIAL_CLIENT"); p != "" {
		return p
	}
	p, err := filepath.Abs("../../.cache/netbird-v0.77.1/netbird")
	if err != nil {
		return ""
	}
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// TestOfficialCLINetworks: NetBird's own `netbird networks` commands work
// against our daemon: it lists, selects and deselects.
func TestOfficialCLINetworks(t *testing.T) {
	bin := officialCLI()
	if bin == "" {
		t.Skip("the official NetBird CLI is not built (bash scripts/netbird-official.sh)")
	}
	ctx := context.Background()
	r := newRig(t)
	mgmt := startKeyServer(t)
	c, _ := r.start()
	sock := "unix://" + filepath.Join(r.dir, "d.sock")
	run := func(args ...string) string {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(cctx, bin, append(args, "--daemon-addr", sock)...)
		cmd.Env = append(os.Environ(), "HOME="+r.dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("official netbird %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	cfg, err := state.Load(filepath.Join(r.dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ManagementURL = mgmt
	if err := state.Save(filepath.Join(r.dir, "config.json"), cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Up(ctx, &daemonpb.UpRequest{}); err != nil {
		t.Fatal(err)
	}
	out := run("networks", "ls")
	for _, want := range []string{
		"Available Networks:",
		"\n  - ID: office\n    Network: 10.10.0.0/16\n    Status: Selected\n",
		"\n  - ID: exit-eu\n    Network: 0.0.0.0/0\n    Status: Not Selected\n",
		"\n  - ID: wiki\n    Domains: wiki.corp\n    Status: Selected\n    Resolved IPs:\n      [wiki.corp]: 10.1.0.5\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("official networks ls lacks %q:\n%s", want, out)
		}
	}
	if out := run("routes", "select", "-a", "exit-eu"); !strings.Contains(out, "Networks selected successfully.") {
		t.Errorf("official select: %s", out)
	}
	if out := run("networks", "deselect", "office"); !strings.Contains(out, "Networks deselected successfully.") {
		t.Errorf("official deselect: %s", out)
	}
	if d := cmp.Diff([]string{"wiki", "exit-eu", "lab"}, selected(t, c)); d != "" {
		t.Errorf("selected after the official CLI (-want +got):\n%s", d)
	}
	// Its status reads the networks from the same fields.
	out = run("status", "-d")
	for _, want := range []string{" gw.netbird.cloud:\n", "  Networks: 0.0.0.0/0, 192.168.50.0/24, wiki.corp\n", "\nNetworks: 172.20.0.0/16\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("official status -d lacks %q:\n%s", want, out)
		}
	}
}

func (f *fakeEngine) RotateSSHKey(_ context.Context, k ed25519.PrivateKey) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rotateErr != nil {
		return f.rotateErr
	}
	f.sshKey = k
	return nil
}

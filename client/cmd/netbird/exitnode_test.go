package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// netDaemon answers the network RPCs from a list and records the
// selection calls, to drive `up --exit-node` over real gRPC.
type netDaemon struct {
	daemonpb.UnimplementedDaemonServiceServer
	mu      sync.Mutex
	nets    []*daemonpb.Network
	hideFor int // ListNetworks answers empty this many times (map not there yet)
	calls   []string
}

func (d *netDaemon) ListNetworks(context.Context, *daemonpb.ListNetworksRequest) (*daemonpb.ListNetworksResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hideFor > 0 {
		d.hideFor--
		return &daemonpb.ListNetworksResponse{}, nil
	}
	return &daemonpb.ListNetworksResponse{Routes: d.nets}, nil
}

func (d *netDaemon) SelectNetworks(_ context.Context, r *daemonpb.SelectNetworksRequest) (*daemonpb.SelectNetworksResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, "select "+strings.Join(r.GetNetworkIDs(), ",")+map[bool]string{true: " -a"}[r.GetAppend()])
	return &daemonpb.SelectNetworksResponse{}, nil
}

func (d *netDaemon) DeselectNetworks(_ context.Context, r *daemonpb.SelectNetworksRequest) (*daemonpb.SelectNetworksResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, "deselect "+strings.Join(r.GetNetworkIDs(), ","))
	return &daemonpb.SelectNetworksResponse{}, nil
}

// TestUseExitNode: `up --exit-node ID` selects that exit node and drops
// the other selected ones, waits for the map to offer it, and refuses an
// unknown ID or a network that is not an exit node without changing the
// selection.
func TestUseExitNode(t *testing.T) {
	offered := func() []*daemonpb.Network {
		return []*daemonpb.Network{
			{ID: "office", Range: "10.10.0.0/16", Selected: true},
			{ID: "exit-eu", Range: "0.0.0.0/0", ExitNode: true, Selected: true},
			{ID: "exit-us", Range: "0.0.0.0/0, ::/0", ExitNode: true},
		}
	}
	tests := []struct {
		name    string
		nets    []*daemonpb.Network
		hideFor int
		id      string
		err     string
		calls   []string
	}{
		{name: "switch", nets: offered(), id: "exit-us", calls: []string{"select exit-us -a", "deselect exit-eu"}},
		{name: "already in use", nets: offered(), id: "exit-eu", calls: []string{"select exit-eu -a"}},
		{name: "map comes later", nets: offered(), hideFor: 3, id: "exit-us", calls: []string{"select exit-us -a", "deselect exit-eu"}},
		{name: "unknown", nets: offered(), id: "exit-jp", err: `exit node "exit-jp" is not offered to this peer; exit nodes offered: exit-eu, exit-us`},
		{name: "no exit nodes", nets: offered()[:1], id: "exit-jp", err: "it is offered no exit node"},
		{name: "not an exit node", nets: offered(), id: "office", err: `"office" is a network (10.10.0.0/16), not an exit node: use netbird networks select office`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &netDaemon{nets: tc.nets, hideFor: tc.hideFor}
			ln := bufconn.Listen(1 << 20)
			g := grpc.NewServer()
			daemonpb.RegisterDaemonServiceServer(g, d)
			go func() { _ = g.Serve(ln) }()
			defer g.Stop()
			conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			err = useExitNode(context.Background(), daemonpb.NewDaemonServiceClient(conn), tc.id, time.Second)
			if tc.err == "" && err != nil {
				t.Fatalf("err = %v", err)
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			if d := cmp.Diff(tc.calls, d.calls); d != "" {
				t.Errorf("calls (-want +got):\n%s", d)
			}
		})
	}
}

// TestNetworksCommand: the cobra wiring of `netbird networks` (and its
// alias routes) against a daemon on a unix socket: what each command
// asks the daemon and what it prints.
func TestNetworksCommand(t *testing.T) {
	dir, err := os.MkdirTemp("", "nbcli")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	d := &netDaemon{nets: []*daemonpb.Network{{ID: "office", Range: "10.10.0.0/16", Selected: true}}}
	g := grpc.NewServer()
	daemonpb.RegisterDaemonServiceServer(g, d)
	go func() { _ = g.Serve(ln) }()
	defer g.Stop()
	run := func(args ...string) string {
		t.Helper()
		c := root()
		var out bytes.Buffer
		c.SetOut(&out)
		c.SetArgs(append(args, "--daemon-addr", "unix://"+sock))
		if err := c.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("netbird %s: %v", strings.Join(args, " "), err)
		}
		return out.String()
	}
	if got, want := run("networks", "ls"), "Available Networks:\n\n  - ID: office\n    Network: 10.10.0.0/16\n    Status: Selected\n"; got != want {
		t.Errorf("networks ls = %q, want %q", got, want)
	}
	if got := run("routes", "list"); !strings.Contains(got, "ID: office") {
		t.Errorf("routes list = %q", got)
	}
	if got := run("routes", "select", "-a", "office", "lab"); got != "Networks selected successfully.\n" {
		t.Errorf("select = %q", got)
	}
	if got := run("networks", "select", "all"); got != "Networks selected successfully.\n" {
		t.Errorf("select all = %q", got)
	}
	if got := run("networks", "deselect", "all"); got != "Networks deselected successfully.\n" {
		t.Errorf("deselect all = %q", got)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if diff := cmp.Diff([]string{"select office,lab -a", "select all", "deselect all"}, d.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

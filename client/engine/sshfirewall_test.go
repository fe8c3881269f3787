package engine

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// servicesFirewall records the services the engine opens.
type servicesFirewall struct {
	ruleSetter // unused methods: nil, never called here
	mu         sync.Mutex
	got        acl.Services
	fail       error // refuse every change with it, keeping got
	calls      int
}

func (f *servicesFirewall) SetServices(s acl.Services) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail != nil {
		return f.fail
	}
	f.got = s
	return nil
}

func (f *servicesFirewall) services() acl.Services { f.mu.Lock(); defer f.mu.Unlock(); return f.got }

// TestSSHOpensPortsToMapPeers: while the SSH server runs, the firewall
// lets the map's peers (their overlay addresses, IPv4 and IPv6, never a
// network they route, never this peer) reach the ports the server holds
// on its overlay address, and nothing else: a port the server could not
// take (the host's sshd on 22) stays closed, and everything closes when
// management turns SSH off.
func TestSSHOpensPortsToMapPeers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the SSH server's ports (22, 22022) need root")
	}
	self, _ := key.NewPrivate()
	other, _ := key.NewPrivate()
	fw := &servicesFirewall{}
	e := &Engine{o: Options{Private: self, AllowServerSSH: true}, log: slog.New(slog.DiscardHandler), filter: fw,
		addr: netip.MustParsePrefix("127.0.0.42/8"), addr6: netip.MustParsePrefix("fd00:42::1/64")}
	peers := []*mgmtpb.RemotePeerConfig{
		{WgPubKey: other.Public().String(), AllowedIps: []string{"127.0.0.2/32", "10.1.0.0/24", "fd00:42::2/128", "0.0.0.0/0"}, Fqdn: "b.mesh"},
		{WgPubKey: "c", AllowedIps: []string{"127.0.0.3/32", "192.168.1.7/32"}, Fqdn: "c.mesh"},
		{WgPubKey: self.Public().String(), AllowedIps: []string{"127.0.0.42/32"}},
	}
	on := &mgmtpb.NetworkMap{PeerConfig: &mgmtpb.PeerConfig{SshConfig: &mgmtpb.SSHConfig{SshEnabled: true}}, FirewallRulesIsEmpty: true, RemotePeers: peers}
	off := &mgmtpb.NetworkMap{PeerConfig: &mgmtpb.PeerConfig{SshConfig: &mgmtpb.SSHConfig{SshEnabled: false}}, FirewallRulesIsEmpty: true, RemotePeers: peers}
	addr := netip.MustParseAddr("127.0.0.42")
	mapPeers := []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("fd00:42::2"), netip.MustParseAddr("127.0.0.3")}
	cmpAddr := cmp.Comparer(func(a, b netip.Addr) bool { return a == b })
	cmpPort := cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })

	if fw.services().Ports != nil {
		t.Fatal("ports open before any map")
	}
	if old := e.applySSH(on); old != nil || e.ssh.srv == nil {
		t.Fatalf("SSH not started (old %v)", old)
	}
	want := acl.Services{Ports: []netip.AddrPort{netip.AddrPortFrom(addr, 22), netip.AddrPortFrom(addr, 22022)}, Peers: mapPeers}
	if d := cmp.Diff(want, fw.services(), cmpAddr, cmpPort); d != "" {
		t.Errorf("server on (-want +got):\n%s", d)
	}
	if old := e.applySSH(off); old == nil {
		t.Fatal("SSH not stopped")
	} else {
		old.Close()
	}
	if d := cmp.Diff(acl.Services{}, fw.services(), cmpAddr, cmpPort); d != "" {
		t.Errorf("server off: ports still open (-want +got):\n%s", d)
	}

	// Another program holds 22 on the address: only 22022 opens.
	ln, err := net.Listen("tcp", "127.0.0.42:22")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if old := e.applySSH(on); old != nil || e.ssh.srv == nil {
		t.Fatalf("SSH not started on 22022 (old %v)", old)
	}
	want.Ports = []netip.AddrPort{netip.AddrPortFrom(addr, 22022)}
	if d := cmp.Diff(want, fw.services(), cmpAddr, cmpPort); d != "" {
		t.Errorf("22 taken (-want +got):\n%s", d)
	}
	e.stopSSH()
	if d := cmp.Diff(acl.Services{}, fw.services(), cmpAddr, cmpPort); d != "" {
		t.Errorf("engine stopped: ports still open (-want +got):\n%s", d)
	}
}

// TestSSHPortsRetried: a firewall refusing a change of the SSH ports
// keeps the previous ones, and the engine does not take them for
// applied: the next map tries again, to open them and, after a failed
// close, to close them (else they would stay open with nothing to
// retry).
func TestSSHPortsRetried(t *testing.T) {
	self, _ := key.NewPrivate()
	hk, err := sshserver.HostKey(self)
	if err != nil {
		t.Fatal(err)
	}
	srv := sshserver.New(sshserver.Options{HostKey: hk}) // serves nothing: openSSHPorts only needs it running
	defer srv.Close()
	fw := &servicesFirewall{fail: errors.New("kernel says no")}
	e := &Engine{o: Options{Private: self}, log: slog.New(slog.DiscardHandler), filter: fw}
	addr := netip.MustParseAddr("100.64.0.1")
	e.ssh.srv, e.ssh.addr, e.ssh.ports = srv, addr, []uint16{22}
	e.ssh.peers = []netip.Addr{netip.MustParseAddr("100.64.0.2")}
	open := acl.Services{Ports: []netip.AddrPort{netip.AddrPortFrom(addr, 22)}, Peers: e.ssh.peers}
	cmpAddr := cmp.Comparer(func(a, b netip.Addr) bool { return a == b })
	cmpPort := cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })
	setFail := func(err error) { fw.mu.Lock(); fw.fail = err; fw.mu.Unlock() }

	e.openSSHPorts() // refused
	setFail(nil)
	e.openSSHPorts() // the next map
	if d := cmp.Diff(open, fw.services(), cmpAddr, cmpPort); d != "" {
		t.Errorf("open refused once, then retried (-want +got):\n%s", d)
	}

	e.ssh.srv = nil // the server stops: close, refused
	setFail(errors.New("kernel says no"))
	e.openSSHPorts()
	if d := cmp.Diff(open, fw.services(), cmpAddr, cmpPort); d != "" {
		t.Fatalf("the failing firewall changed (-want +got):\n%s", d)
	}
	setFail(nil)
	e.openSSHPorts()
	if d := cmp.Diff(acl.Services{}, fw.services(), cmpAddr, cmpPort); d != "" {
		t.Errorf("close refused once, then retried: still open (-want +got):\n%s", d)
	}
	// Applied: later maps change nothing more.
	fw.mu.Lock()
	calls := fw.calls
	fw.mu.Unlock()
	e.openSSHPorts()
	if fw.mu.Lock(); fw.calls != calls {
		t.Errorf("an unchanged map rewrote the firewall")
	}
	fw.mu.Unlock()
}

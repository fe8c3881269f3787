package engine

import (
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestSSHAccess: what the SSH server takes from a map: the remote peers
// at their overlay address with their SSH key if valid (without one if
// they have none), never this peer, and
// the firewall rules as the packet filter reads them (legacy allow-all
// included).
func TestSSHAccess(t *testing.T) {
	self, _ := key.NewPrivate()
	other, _ := key.NewPrivate()
	ak, _ := sshserver.AuthorizedKey(other)
	own, _ := sshserver.AuthorizedKey(self)
	peers := []*mgmtpb.RemotePeerConfig{
		{WgPubKey: other.Public().String(), AllowedIps: []string{"100.64.0.2/32"}, Fqdn: "b.mesh", SshConfig: &mgmtpb.SSHConfig{SshPubKey: []byte(ak)}},
		{WgPubKey: self.Public().String(), AllowedIps: []string{"100.64.0.1/32"}, SshConfig: &mgmtpb.SSHConfig{SshPubKey: []byte(own)}},
		{WgPubKey: "c", AllowedIps: []string{"100.64.0.3/32"}, Fqdn: "c.mesh"},
		{WgPubKey: "d", AllowedIps: []string{"100.64.0.4/32"}, Fqdn: "d.mesh", SshConfig: &mgmtpb.SSHConfig{SshPubKey: []byte("ssh-ed25519 !!")}},
	}
	var warned []string
	warn := func(msg string, _ ...any) { warned = append(warned, msg) }
	ssh22 := &mgmtpb.FirewallRule{PeerIP: "100.64.0.2", Direction: mgmtpb.RuleDirection_IN, Action: mgmtpb.RuleAction_ACCEPT, Protocol: mgmtpb.RuleProtocol_TCP, Port: "22"}
	tests := []struct {
		name      string
		nm        *mgmtpb.NetworkMap
		allowAll  bool
		rules     []acl.Rule
		bAllowed  bool
		wantWarns int
	}{
		{"legacy empty list", &mgmtpb.NetworkMap{RemotePeers: peers}, true, nil, true, 1},
		{"marked empty", &mgmtpb.NetworkMap{RemotePeers: peers, FirewallRulesIsEmpty: true}, false, nil, false, 1},
		{"tcp/22 from b", &mgmtpb.NetworkMap{RemotePeers: peers, FirewallRules: []*mgmtpb.FirewallRule{ssh22}}, false,
			[]acl.Rule{{Peer: netip.MustParseAddr("100.64.0.2"), Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: 22, PortHi: 22}}, true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			warned = nil
			a := sshAccess(tc.nm, self.Public(), warn)
			// c has no key: it stays, for a token login (NetBird's JWT
			// check); so does d, whose key does not parse: the server
			// must know it for a map peer to refuse it with a reason.
			if len(a.Peers) != 3 || a.Peers[0].Name != "b.mesh" || a.Peers[0].IP != netip.MustParseAddr("100.64.0.2") || a.Peers[0].Key == nil ||
				a.Peers[1].Name != "c.mesh" || a.Peers[1].Key != nil ||
				a.Peers[2].Name != "d.mesh" || a.Peers[2].IP != netip.MustParseAddr("100.64.0.4") || a.Peers[2].Key != nil {
				t.Fatalf("peers %+v", a.Peers)
			}
			if a.AllowAll != tc.allowAll || len(a.Rules) != len(tc.rules) || (len(tc.rules) > 0 && a.Rules[0] != tc.rules[0]) {
				t.Fatalf("allowAll %v rules %+v", a.AllowAll, a.Rules)
			}
			if len(warned) != tc.wantWarns || !strings.Contains(warned[0], "SSH key not understood") {
				t.Errorf("warnings %v", warned)
			}
			_, err := a.Authorize(a.Peers[0].Key, netip.MustParseAddr("100.64.0.2"))
			if (err == nil) != tc.bAllowed {
				t.Errorf("b allowed: %v, want %v", err, tc.bAllowed)
			}
		})
	}
}

// TestApplySSHStopsOutsideLock: a map that turns SSH off (or moves the
// address) hands the running server back for the caller to close after
// e.mu is released: Close waits for sessions and must never run under
// the engine's lock. The server also takes the overlay prefix, so that
// it drops sources outside it.
func TestApplySSHStopsOutsideLock(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the SSH server's ports (22, 22022) need root")
	}
	self, _ := key.NewPrivate()
	e := &Engine{o: Options{Private: self, AllowServerSSH: true}, log: slog.New(slog.DiscardHandler), addr: netip.MustParsePrefix("127.0.0.42/8")}
	on := &mgmtpb.NetworkMap{PeerConfig: &mgmtpb.PeerConfig{SshConfig: &mgmtpb.SSHConfig{SshEnabled: true}}, FirewallRulesIsEmpty: true}
	if old := e.applySSH(on); old != nil || e.ssh.srv == nil {
		t.Fatalf("SSH not started (old %v)", old)
	}
	srv := e.ssh.srv
	t.Cleanup(srv.Close)
	if e.ssh.overlay != netip.MustParsePrefix("127.0.0.0/8") {
		t.Errorf("overlay %v", e.ssh.overlay)
	}
	off := &mgmtpb.NetworkMap{PeerConfig: &mgmtpb.PeerConfig{SshConfig: &mgmtpb.SSHConfig{SshEnabled: false}}, FirewallRulesIsEmpty: true}
	old := e.applySSH(off)
	if old != srv || e.ssh.srv != nil {
		t.Fatalf("applySSH returned %p, want the running %p; left %p", old, srv, e.ssh.srv)
	}
	// Not closed yet: that is the caller's, after the lock.
	c, err := net.DialTimeout("tcp", "127.0.0.42:22022", time.Second)
	if err != nil {
		t.Fatalf("server closed inside applySSH: %v", err)
	}
	c.Close()
	old.Close()
	if c, err := net.DialTimeout("tcp", "127.0.0.42:22022", time.Second); err == nil {
		c.Close()
		t.Errorf("still listening after Close")
	}
}

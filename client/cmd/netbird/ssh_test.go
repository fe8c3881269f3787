package main

import (
	"os/user"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// TestFindPeer: `netbird ssh` finds a peer by short name, FQDN (with or
// without the final dot, any case) or overlay IP, and says why not.
func TestFindPeer(t *testing.T) {
	k, _ := key.NewPrivate()
	ak, _ := sshserver.AuthorizedKey(k)
	peers := []*daemonpb.PeerState{
		{IP: "100.64.0.2", Fqdn: "web1.netbird.selfhosted", SshHostKey: []byte(ak)},
		{IP: "100.64.0.3", Fqdn: "db.netbird.selfhosted"},
		{IP: "100.64.0.4", Fqdn: "dup.a.example"},
		{IP: "100.64.0.5", Fqdn: "dup.b.example"},
		{IP: "100.64.0.6", Fqdn: "bad.netbird.selfhosted", SshHostKey: []byte("ssh-ed25519 !!")},
	}
	for _, name := range []string{"web1", "WEB1.netbird.selfhosted.", "100.64.0.2"} {
		got, err := findPeer(peers, name)
		if err != nil || got.ip != "100.64.0.2" || got.hostKey == nil {
			t.Errorf("%s: %+v %v", name, got, err)
		}
	}
	for name, want := range map[string]string{"nope": "nope is not in this peer's network map: no policy connects them", "db": "has no SSH key", "dup": "several peers", "bad": "SSH public key"} {
		if _, err := findPeer(peers, name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
	out, n, skipped := sshConfig("/usr/bin/netbird", "unix:///var/run/netbird.sock", "/root/.ssh/nb", false, peers)
	if n != 1 || !strings.Contains(out, "Host web1.netbird.selfhosted 100.64.0.2\n") ||
		!strings.Contains(out, "ProxyCommand /usr/bin/netbird --daemon-addr unix:///var/run/netbird.sock ssh proxy web1.netbird.selfhosted %p") ||
		!strings.Contains(out, "IdentityFile /root/.ssh/nb") || strings.Contains(out, "Host db") || len(skipped) != 1 {
		t.Errorf("ssh-config (%d blocks, skipped %q):\n%s", n, skipped, out)
	}
	if out, _, _ := sshConfig("/usr/bin/netbird", "unix:///var/run/netbird.sock", "", true, peers); !strings.Contains(out, "Host web1 web1.netbird.selfhosted 100.64.0.2\n") {
		t.Errorf("--short-names:\n%s", out)
	}
}

// TestSSHConfigHostile: names and addresses a peer controls never reach
// the shell OpenSSH runs ProxyCommand/KnownHostsCommand with.
func TestSSHConfigHostile(t *testing.T) {
	k, _ := key.NewPrivate()
	ak, _ := sshserver.AuthorizedKey(k)
	hostile := []*daemonpb.PeerState{
		{IP: "100.64.0.2", Fqdn: "x;touch /tmp/pwned;.netbird.selfhosted", SshHostKey: []byte(ak)},
		{IP: "100.64.0.3", Fqdn: "$(id).netbird.selfhosted", SshHostKey: []byte(ak)},
		{IP: "100.64.0.4 ; id", Fqdn: "ok.netbird.selfhosted", SshHostKey: []byte(ak)},
		{IP: "100.64.0.5", Fqdn: "a b.netbird.selfhosted", SshHostKey: []byte(ak)},
		{IP: "100.64.0.6", Fqdn: "-oProxyCommand=x.netbird.selfhosted", SshHostKey: []byte(ak)},
		{IP: "100.64.0.7", Fqdn: "nl\nHost *.netbird.selfhosted", SshHostKey: []byte(ak)},
	}
	out, n, skipped := sshConfig("/usr/bin/netbird", "unix:///var/run/netbird.sock", "", true, hostile)
	if n != 0 || len(skipped) != len(hostile) {
		t.Errorf("hostile peers written (%d, skipped %q):\n%s", n, skipped, out)
	}
	for _, name := range []string{"web1.netbird.selfhosted", "a-b.c0", "x"} {
		if !safeDNSName(name) {
			t.Errorf("%s refused", name)
		}
	}
}

// TestDefaultSSHUser: under sudo the remote user is the one who ran
// sudo, not root; SUDO_USER means nothing to a process not running as
// root.
func TestDefaultSSHUser(t *testing.T) {
	cur := func(name string) func() (*user.User, error) {
		return func() (*user.User, error) { return &user.User{Username: name}, nil }
	}
	for _, tc := range []struct {
		uid       int
		sudo, cur string
		want      string
	}{
		{0, "alice", "root", "alice"},
		{0, "", "root", "root"},
		{1000, "mallory", "bob", "bob"},
	} {
		if got, err := defaultSSHUser(tc.uid, tc.sudo, cur(tc.cur)); err != nil || got != tc.want {
			t.Errorf("uid %d SUDO_USER %q current %q: %q %v, want %q", tc.uid, tc.sudo, tc.cur, got, err, tc.want)
		}
	}
}

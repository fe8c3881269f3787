package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// TestPrintNetworks: `netbird networks ls` prints what the official CLI
// prints, for network, exit-node and domain routes, resolved or not.
func TestPrintNetworks(t *testing.T) {
	tests := []struct {
		name string
		in   []*daemonpb.Network
		want string
	}{
		{name: "none", want: "No networks available.\n"},
		{
			name: "networks and domains",
			in: []*daemonpb.Network{
				{ID: "exit-eu", Range: "0.0.0.0/0, ::/0", ExitNode: true},
				{ID: "office", Range: "10.10.0.0/16", Selected: true},
				{ID: "wiki", Range: "invalid Prefix", Domains: []string{"wiki.corp", "*.docs.corp"}, Selected: true,
					ResolvedIPs: map[string]*daemonpb.IPList{"wiki.corp": {Ips: []string{"10.1.0.5"}}, "a.docs.corp": {Ips: []string{"10.1.0.6", "10.1.0.7"}}}},
				{ID: "git", Domains: []string{"git.corp"}},
			},
			want: "Available Networks:\n" +
				"\n  - ID: exit-eu\n    Network: 0.0.0.0/0, ::/0\n    Status: Not Selected\n" +
				"\n  - ID: office\n    Network: 10.10.0.0/16\n    Status: Selected\n" +
				"\n  - ID: wiki\n    Domains: wiki.corp, *.docs.corp\n    Status: Selected\n    Resolved IPs:\n      [a.docs.corp]: 10.1.0.6, 10.1.0.7\n      [wiki.corp]: 10.1.0.5\n" +
				"\n  - ID: git\n    Domains: git.corp\n    Status: Not Selected\n    Resolved IPs: -\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			printNetworks(&b, tc.in)
			if d := cmp.Diff(tc.want, b.String()); d != "" {
				t.Errorf("output (-want +got):\n%s", d)
			}
		})
	}
}

// TestStatusNetworks: status shows per peer the networks it routes for
// us (sorted, "-" for none), the networks this peer routes for others
// and the exit node in use, in text (plain and -d) and JSON.
func TestStatusNetworks(t *testing.T) {
	r := &daemonpb.StatusResponse{Status: "Connected", FullStatus: &daemonpb.FullStatus{
		ManagementState: &daemonpb.ManagementState{Connected: true},
		LocalPeerState:  &daemonpb.LocalPeerState{IP: "100.64.0.1/16", Networks: []string{"192.168.9.0/24", "10.9.0.0/16"}, ExitNode: "exit-eu", ExitNodePeer: "gw.netbird.cloud"},
		Peers: []*daemonpb.PeerState{
			{IP: "100.64.0.2", Fqdn: "gw.netbird.cloud", ConnStatus: "Connected", Networks: []string{"0.0.0.0/0", "10.10.0.0/16"}},
			{IP: "100.64.0.3", Fqdn: "laptop.netbird.cloud", ConnStatus: "Connected"},
		}}}
	js := toJSON(r)
	if d := cmp.Diff([]string{"10.9.0.0/16", "192.168.9.0/24"}, js.Networks); d != "" {
		t.Errorf("local networks (-want +got):\n%s", d)
	}
	if js.ExitNode != "exit-eu" || js.ExitNodePeer != "gw.netbird.cloud" {
		t.Errorf("exit node = %q via %q", js.ExitNode, js.ExitNodePeer)
	}
	if js.Peers.Details[1].Networks == nil {
		t.Error("a peer without networks has null networks in JSON, want []")
	}
	var plainOut, detail bytes.Buffer
	printText(&plainOut, js, false)
	printText(&detail, js, true)
	for _, want := range []string{"Networks: 10.9.0.0/16, 192.168.9.0/24\n", "Exit node: exit-eu via gw.netbird.cloud\n"} {
		if !strings.Contains(plainOut.String(), want) || !strings.Contains(detail.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, detail.String())
		}
	}
	for _, want := range []string{
		" gw.netbird.cloud:\n  NetBird IP: 100.64.0.2\n", "  Networks: 0.0.0.0/0, 10.10.0.0/16\n\n laptop.netbird.cloud:",
		" laptop.netbird.cloud:\n  NetBird IP: 100.64.0.3\n",
	} {
		if !strings.Contains(detail.String(), want) {
			t.Errorf("status -d lacks %q:\n%s", want, detail.String())
		}
	}
	if !strings.Contains(detail.String(), "Transfer status (received/sent) 0 B/0 B\n  Networks: -\n") {
		t.Errorf("a peer routing nothing does not show Networks: -\n%s", detail.String())
	}
	if strings.Contains(plainOut.String(), "  Networks:") {
		t.Errorf("plain status shows peer details:\n%s", plainOut.String())
	}

	none := toJSON(&daemonpb.StatusResponse{Status: "Connected", FullStatus: &daemonpb.FullStatus{
		LocalPeerState: &daemonpb.LocalPeerState{ExitNode: "exit-eu"}}})
	var b bytes.Buffer
	printText(&b, none, false)
	if !strings.Contains(b.String(), "Networks: -\nExit node: exit-eu (no routing peer connected)\n") {
		t.Errorf("status without networks or a connected exit node:\n%s", b.String())
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// TestStatusIPv6: the IPv6 overlay addresses appear as the official CLI
// shows them (a "NetBird IPv6:" line, netbirdIpv6 in JSON) only where a
// peer has one; -I filters on them too.
func TestStatusIPv6(t *testing.T) {
	r := &daemonpb.StatusResponse{Status: "Connected", FullStatus: &daemonpb.FullStatus{
		LocalPeerState: &daemonpb.LocalPeerState{IP: "100.77.0.5/16", Ipv6: "fd00:1:2:3::5/64"},
		Peers: []*daemonpb.PeerState{
			{IP: "100.77.0.6", Ipv6: "fd00:1:2:3::6", Fqdn: "six.netbird.selfhosted", ConnStatus: "Connected"},
			{IP: "100.77.0.7", Fqdn: "seven.netbird.selfhosted", ConnStatus: "Connected"},
		}}}
	js := toJSON(r)
	var b bytes.Buffer
	printText(&b, js, true)
	out := b.String()
	for _, want := range []string{"NetBird IP: 100.77.0.5/16\nNetBird IPv6: fd00:1:2:3::5/64\n", "  NetBird IP: 100.77.0.6\n  NetBird IPv6: fd00:1:2:3::6\n", "  NetBird IP: 100.77.0.7\n  Public key:"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	raw, err := json.Marshal(js)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(raw); !strings.Contains(s, `"netbirdIpv6":"fd00:1:2:3::5/64"`) || !strings.Contains(s, `"netbirdIpv6":"fd00:1:2:3::6"`) || strings.Count(s, "netbirdIpv6") != 2 {
		t.Errorf("JSON IPv6 fields wrong: %s", s)
	}
	if got := filter(js.Peers.Details, []string{"fd00:1:2:3::6"}, nil, "", ""); len(got) != 1 || got[0].FQDN != "six.netbird.selfhosted" {
		t.Errorf("filter by IPv6 = %+v", got)
	}
	// Without IPv6, nothing about it.
	b.Reset()
	printText(&b, toJSON(&daemonpb.StatusResponse{FullStatus: &daemonpb.FullStatus{LocalPeerState: &daemonpb.LocalPeerState{IP: "100.77.0.5/16"}}}), false)
	if strings.Contains(b.String(), "IPv6") {
		t.Errorf("IPv6 line without an address:\n%s", b.String())
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// TestStatusDNSMode: `status -d` names the host DNS integration the
// daemon reports; plain status does not.
func TestStatusDNSMode(t *testing.T) {
	r := &daemonpb.StatusResponse{Status: "Connected", FullStatus: &daemonpb.FullStatus{
		LocalPeerState: &daemonpb.LocalPeerState{DnsMode: "systemd-resolved"}}}
	js := toJSON(r)
	var plain, detail bytes.Buffer
	printText(&plain, js, false)
	printText(&detail, js, true)
	if !strings.Contains(detail.String(), "\nDNS: systemd-resolved\n") {
		t.Errorf("status -d lacks the DNS line:\n%s", detail.String())
	}
	if strings.Contains(plain.String(), "DNS:") {
		t.Errorf("plain status shows the DNS line:\n%s", plain.String())
	}
}

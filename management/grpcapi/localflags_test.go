package grpcapi

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestMetaLocalFlags: the flags a peer reports in its system meta are
// kept as it sent them (REST shows them as local_flags); none reported
// is all false.
func TestMetaLocalFlags(t *testing.T) {
	tests := []struct {
		name string
		in   *mgmtpb.Flags
		want account.LocalFlags
	}{
		{"none", nil, account.LocalFlags{}},
		{"route flags", &mgmtpb.Flags{DisableClientRoutes: true, BlockLANAccess: true},
			account.LocalFlags{DisableClientRoutes: true, BlockLANAccess: true}},
		{"every flag", &mgmtpb.Flags{RosenpassEnabled: true, RosenpassPermissive: true, ServerSSHAllowed: true, DisableClientRoutes: true,
			DisableServerRoutes: true, DisableDNS: true, DisableFirewall: true, BlockLANAccess: true, BlockInbound: true, LazyConnectionEnabled: true, DisableIPv6: true},
			account.LocalFlags{RosenpassEnabled: true, RosenpassPermissive: true, ServerSSHAllowed: true, DisableClientRoutes: true,
				DisableServerRoutes: true, DisableDNS: true, DisableFirewall: true, BlockLANAccess: true, BlockInbound: true, LazyConnectionEnabled: true, DisableIPv6: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := metaFromProto(&mgmtpb.PeerSystemMeta{Hostname: "h", Flags: tc.in}).Flags
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("flags (-want +got):\n%s", d)
			}
		})
	}
}

// TestMetaIPv6Capability: capability IPv6Overlay (2) among whatever else
// the agent lists marks the peer v6-capable; SupportsIPv6 also needs
// flags.disableIPv6 off.
func TestMetaIPv6Capability(t *testing.T) {
	const (
		src = mgmtpb.PeerCapability_PeerCapabilitySourcePrefixes
		v6  = mgmtpb.PeerCapability_PeerCapabilityIPv6Overlay
	)
	tests := []struct {
		name              string
		caps              []mgmtpb.PeerCapability
		disable           bool
		overlay, supports bool
	}{
		{"none", nil, false, false, false},
		{"source prefixes only", []mgmtpb.PeerCapability{src}, false, false, false},
		{"v6 with others and unknown", []mgmtpb.PeerCapability{src, 99, v6, v6}, false, true, true},
		{"v6 but disabled", []mgmtpb.PeerCapability{v6}, true, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := metaFromProto(&mgmtpb.PeerSystemMeta{Hostname: "h", Capabilities: tc.caps, Flags: &mgmtpb.Flags{DisableIPv6: tc.disable}})
			if m.IPv6Overlay != tc.overlay {
				t.Errorf("IPv6Overlay = %v, want %v", m.IPv6Overlay, tc.overlay)
			}
			if got := (account.Peer{Meta: m}).SupportsIPv6(); got != tc.supports {
				t.Errorf("SupportsIPv6 = %v, want %v", got, tc.supports)
			}
		})
	}
}

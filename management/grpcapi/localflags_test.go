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
			DisableServerRoutes: true, DisableDNS: true, DisableFirewall: true, BlockLANAccess: true, BlockInbound: true, LazyConnectionEnabled: true},
			account.LocalFlags{RosenpassEnabled: true, RosenpassPermissive: true, ServerSSHAllowed: true, DisableClientRoutes: true,
				DisableServerRoutes: true, DisableDNS: true, DisableFirewall: true, BlockLANAccess: true, BlockInbound: true, LazyConnectionEnabled: true}},
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

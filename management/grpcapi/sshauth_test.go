package grpcapi

import (
	"encoding/hex"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/management/account"
)

// TestSSHAuthFor: sshAuth lists the account's active users (not blocked,
// pending or service users), hashed as NetBird's agents compare them
// (BLAKE2b-128; the vector from Python's hashlib.blake2b(digest_size=16)),
// each allowed as any local user.
func TestSSHAuthFor(t *testing.T) {
	us := []account.User{
		{ID: "user@example.com"},
		{ID: "blocked", Blocked: true},
		{ID: "svc", ServiceUser: true},
		{ID: "pending", PendingApproval: true},
		{ID: "another"},
	}
	a := sshAuthFor(us)
	var got []string
	for _, h := range a.AuthorizedUsers {
		got = append(got, hex.EncodeToString(h))
	}
	want := []string{hex.EncodeToString(hashUserID("another")), "a5060c048fc2219ff10f83c61bf65c81"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("authorized users (-want +got):\n%s", d)
	}
	if a.UserIDClaim != "sub" {
		t.Errorf("claim %q, want sub", a.UserIDClaim)
	}
	if d := cmp.Diff(map[string][]uint32{"*": {0, 1}}, map[string][]uint32{"*": a.MachineUsers["*"].GetIndexes()}); d != "" || len(a.MachineUsers) != 1 {
		t.Errorf("machine users %v (-want +got):\n%s", a.MachineUsers, d)
	}
	if empty := sshAuthFor(nil); len(empty.AuthorizedUsers) != 0 || empty.MachineUsers["*"] == nil {
		t.Errorf("no users: %v", empty)
	}
}

package wg

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestSetAddress6Darwin: the macOS command sequence sets, moves and
// removes the IPv6 overlay address; a route that cannot be added takes
// the alias back out, so nothing stays on the interface unrecorded.
func TestSetAddress6Darwin(t *testing.T) {
	var lines []string
	fail := map[string]bool{}
	run := func(name string, args ...string) ([]byte, error) {
		l := strings.Join(append([]string{name}, args...), " ")
		lines = append(lines, l)
		if fail[l] {
			return []byte("route: writing to routing socket: File exists"), errors.New("exit status 1")
		}
		return nil, nil
	}
	first, second := netip.MustParsePrefix("fd00:1::5/64"), netip.MustParsePrefix("fd00:2::5/64")
	set, err := setAddress6Darwin(run, "utun7", netip.Prefix{}, first)
	if err != nil || set != first {
		t.Fatalf("set %v, %v", set, err)
	}
	want := []string{
		"ifconfig utun7 inet6 fd00:1::5 prefixlen 64 alias",
		"route -q -n delete -inet6 fd00:1::/64 -interface utun7",
		"route -q -n add -inet6 fd00:1::/64 -interface utun7",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("set:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// Moving to second, whose route fails: the old address goes, the new
	// alias is deleted again, nothing is recorded.
	lines = nil
	fail["route -q -n add -inet6 fd00:2::/64 -interface utun7"] = true
	set, err = setAddress6Darwin(run, "utun7", first, second)
	if err == nil || set.IsValid() || !strings.Contains(err.Error(), "fd00:2::/64") {
		t.Fatalf("failed route: set %v, err %v", set, err)
	}
	want = []string{
		"ifconfig utun7 inet6 fd00:1::5 delete",
		"route -q -n delete -inet6 fd00:1::/64 -interface utun7",
		"ifconfig utun7 inet6 fd00:2::5 prefixlen 64 alias",
		"route -q -n delete -inet6 fd00:2::/64 -interface utun7",
		"route -q -n add -inet6 fd00:2::/64 -interface utun7",
		"ifconfig utun7 inet6 fd00:2::5 delete",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("failed route:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// The alias itself refused: nothing to take back.
	lines = nil
	fail["ifconfig utun7 inet6 fd00:2::5 prefixlen 64 alias"] = true
	if set, err := setAddress6Darwin(run, "utun7", netip.Prefix{}, second); err == nil || set.IsValid() {
		t.Fatalf("refused alias: set %v, err %v", set, err)
	}
	if len(lines) != 1 {
		t.Errorf("refused alias ran %q", lines)
	}
	// Removal.
	lines = nil
	if set, err := setAddress6Darwin(run, "utun7", first, netip.Prefix{}); err != nil || set.IsValid() {
		t.Fatalf("remove: set %v, err %v", set, err)
	}
	want = []string{"ifconfig utun7 inet6 fd00:1::5 delete", "route -q -n delete -inet6 fd00:1::/64 -interface utun7"}
	if !slices.Equal(lines, want) {
		t.Errorf("remove ran %q, want %q", lines, want)
	}
}

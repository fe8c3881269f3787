package posture

import (
	"testing"

	"github.com/wiremesh/wiremesh/management/account"
)

func TestPasses(t *testing.T) {
	linux := account.Meta{GoOS: "linux", KernelVersion: "6.1.0-18-amd64", NetbirdVersion: "0.77.1", Addresses: []string{"192.168.1.20/24", "100.64.0.5/16"},
		ConnectionIP: "203.0.113.7", Files: []account.FileState{{Path: "/usr/bin/falcon", Exist: true, ProcessIsRunning: true}, {Path: "/usr/bin/idle", Exist: true}}}
	mac := account.Meta{GoOS: "darwin", OSVersion: "13.2.1", NetbirdVersion: "0.25.0"}
	cases := []struct {
		name string
		c    account.Checks
		m    account.Meta
		want bool
	}{
		{"version ok", account.Checks{NBVersion: &account.MinVersion{MinVersion: "0.77.0"}}, linux, true},
		{"version equal", account.Checks{NBVersion: &account.MinVersion{MinVersion: "0.77.1"}}, linux, true},
		{"version low", account.Checks{NBVersion: &account.MinVersion{MinVersion: "0.78"}}, linux, false},
		{"version dev build", account.Checks{NBVersion: &account.MinVersion{MinVersion: "0.1"}}, account.Meta{NetbirdVersion: "development"}, false},
		{"kernel ok", account.Checks{OSVersion: &account.OSVersionCheck{Linux: &account.MinKernel{MinKernelVersion: "5.10"}}}, linux, true},
		{"kernel low", account.Checks{OSVersion: &account.OSVersionCheck{Linux: &account.MinKernel{MinKernelVersion: "6.2"}}}, linux, false},
		{"os not listed", account.Checks{OSVersion: &account.OSVersionCheck{Linux: &account.MinKernel{MinKernelVersion: "5.10"}}}, mac, false},
		{"darwin ok", account.Checks{OSVersion: &account.OSVersionCheck{Darwin: &account.MinVersion{MinVersion: "13.0"}}}, mac, true},
		{"range allow in", account.Checks{PeerNetworkRange: &account.NetworkRangeCheck{Ranges: []string{"192.168.0.0/16"}, Action: "allow"}}, linux, true},
		{"range allow public", account.Checks{PeerNetworkRange: &account.NetworkRangeCheck{Ranges: []string{"203.0.113.0/24"}, Action: "allow"}}, linux, true},
		{"range allow out", account.Checks{PeerNetworkRange: &account.NetworkRangeCheck{Ranges: []string{"10.0.0.0/8"}, Action: "allow"}}, linux, false},
		{"range deny in", account.Checks{PeerNetworkRange: &account.NetworkRangeCheck{Ranges: []string{"192.168.1.0/24"}, Action: "deny"}}, linux, false},
		{"range deny out", account.Checks{PeerNetworkRange: &account.NetworkRangeCheck{Ranges: []string{"10.0.0.0/8"}, Action: "deny"}}, linux, true},
		{"process running", account.Checks{Process: &account.ProcessCheck{Processes: []account.Process{{LinuxPath: "/usr/bin/falcon"}}}}, linux, true},
		{"process not running", account.Checks{Process: &account.ProcessCheck{Processes: []account.Process{{LinuxPath: "/usr/bin/idle"}}}}, linux, false},
		{"process no path for os", account.Checks{Process: &account.ProcessCheck{Processes: []account.Process{{WindowsPath: "C:\\x.exe"}}}}, linux, false},
		{"all together", account.Checks{NBVersion: &account.MinVersion{MinVersion: "0.70"}, PeerNetworkRange: &account.NetworkRangeCheck{Ranges: []string{"10.0.0.0/8"}, Action: "allow"}}, linux, false},
	}
	for _, c := range cases {
		if got, why := Passes(c.c, c.m); got != c.want {
			t.Errorf("%s: got %v (%s), want %v", c.name, got, why, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	bad := []account.Checks{
		{},
		{GeoLocation: &account.GeoLocationCheck{Locations: []account.Location{{CountryCode: "DE"}}, Action: "allow"}},
		{NBVersion: &account.MinVersion{MinVersion: "latest"}},
		{PeerNetworkRange: &account.NetworkRangeCheck{Ranges: []string{"10.0.0.0/33"}, Action: "allow"}},
		{PeerNetworkRange: &account.NetworkRangeCheck{Ranges: []string{"10.0.0.0/8"}, Action: "maybe"}},
		{Process: &account.ProcessCheck{Processes: []account.Process{{}}}},
	}
	for i, c := range bad {
		if err := Validate(c); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
	if err := Validate(account.Checks{NBVersion: &account.MinVersion{MinVersion: "0.25.0"}}); err != nil {
		t.Fatal(err)
	}
}

func FuzzVersion(f *testing.F) {
	f.Add("0.77.1", "0.25.0")
	f.Add("v6.1.0-18-amd64", "6.1")
	f.Fuzz(func(t *testing.T, a, b string) {
		if atLeast(a, b) && atLeast(b, a) {
			x, _ := parseVersion(a)
			y, _ := parseVersion(b)
			for i := 0; i < max(len(x), len(y)); i++ {
				var p, q int
				if i < len(x) {
					p = x[i]
				}
				if i < len(y) {
					q = y[i]
				}
				if p != q {
					t.Fatalf("%q and %q both at least the other", a, b)
				}
			}
		}
	})
}

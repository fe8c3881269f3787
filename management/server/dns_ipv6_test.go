package server_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/compactip"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// peerZoneAAAA is the AAAA records of a map's peer zone, as "name rdata".
func peerZoneAAAA(nm *mgmtpb.NetworkMap) []string {
	_, domain, _ := strings.Cut(nm.GetPeerConfig().GetFqdn(), ".")
	var out []string
	for _, z := range nm.GetDNSConfig().GetCustomZones() {
		if z.GetDomain() != domain+"." {
			continue
		}
		for _, r := range z.GetRecords() {
			if r.GetType() == 28 {
				out = append(out, r.GetName()+" "+r.GetRData())
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestDNSIPv6InMaps: in a new account (the All group has the IPv6
// overlay) peers whose agents report the capability get an address_v6
// at Login that every Sync repeats (else the official client restarts in
// a loop), each other's /128 and AAAA records, on a delta stream (a, our
// agent) and a whole-map one (b); c, run with --disable-ipv6, gets none
// of it and is named by A records only. When the account takes the
// overlay off, a's and b's maps lose it too.
func TestDNSIPv6InMaps(t *testing.T) { engines.Each(t, testDNSIPv6InMaps) }

func testDNSIPv6InMaps(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))["key"].(string)
	streams := map[string]*testpeer.Stream{}
	login := map[string][]byte{}
	for _, name := range []string{"a", "b", "c"} {
		p := testpeer.New(e.conn, name)
		p.Deltas = name == "a"
		p.IPv6 = true
		p.DisableIPv6 = name == "c"
		lr, err := p.Login(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		login[name] = lr.GetPeerConfig().GetAddressV6()
		s, err := p.Sync(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		streams[name] = s
	}
	v6 := map[string]netip.Addr{}
	for _, name := range []string{"a", "b"} {
		p, err := compactip.Parse(login[name])
		if err != nil || !p.Addr().Is6() || p.Bits() != 64 {
			t.Fatalf("%s: Login address_v6 %v (%s, %v), want a /64 address", name, login[name], p, err)
		}
		v6[name] = p.Addr()
	}
	if login["c"] != nil {
		t.Fatalf("c (--disable-ipv6): Login address_v6 %v", login["c"])
	}
	want := []string{"a.netbird.selfhosted " + v6["a"].String(), "b.netbird.selfhosted " + v6["b"].String()}
	for name, s := range streams {
		nm := waitDNSMap(t, name, s, 5*time.Second, func(nm *mgmtpb.NetworkMap) bool {
			return len(nm.GetRemotePeers()) == 2 && len(peerZoneNames(nm)) >= 3
		})
		if got := nm.GetPeerConfig().GetAddressV6(); string(got) != string(login[name]) {
			t.Errorf("%s: Sync address_v6 %v, Login gave %v: the client would restart", name, got, login[name])
		}
		aaaa := peerZoneAAAA(nm)
		if name == "c" {
			if len(aaaa) != 0 {
				t.Errorf("c: AAAA records %v", aaaa)
			}
		} else if !slices.Equal(aaaa, want) {
			t.Errorf("%s: AAAA records %v, want %v", name, aaaa, want)
		}
		for _, rp := range nm.GetRemotePeers() {
			other := strings.TrimSuffix(rp.GetFqdn(), ".netbird.selfhosted")
			wantIPs := 1
			if name != "c" && other != "c" {
				wantIPs = 2
			}
			if ips := rp.GetAllowedIps(); len(ips) != wantIPs || wantIPs == 2 && ips[1] != v6[other].String()+"/128" {
				t.Errorf("%s: allowed IPs of %s: %v", name, other, ips)
			}
		}
	}

	// The account takes the overlay off: no v6 left in any map.
	acc := accountOf(o)
	settings := obj(acc["settings"])
	settings["ipv6_enabled_groups"] = []string{}
	o.call("PUT", "/api/accounts/"+acc["id"].(string), map[string]any{"settings": settings}, 200)
	for name, s := range streams {
		waitDNSMap(t, name, s, 2*time.Second, func(nm *mgmtpb.NetworkMap) bool {
			if nm.GetPeerConfig().GetAddressV6() != nil || len(peerZoneAAAA(nm)) != 0 {
				return false
			}
			for _, rp := range nm.GetRemotePeers() {
				if len(rp.GetAllowedIps()) != 1 {
					return false
				}
			}
			return true
		})
	}
}

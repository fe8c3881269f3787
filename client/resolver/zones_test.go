package resolver

import (
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

func corpZone() Zone {
	return Zone{Domain: "corp.test", Search: true, Records: []Record{
		{Name: "www.corp.test", Type: dns.TypeA, TTL: 300, Data: "10.0.0.1"},
		{Name: "www.corp.test", Type: dns.TypeAAAA, TTL: 300, Data: "fd00::1"},
		{Name: "web.corp.test", Type: dns.TypeCNAME, TTL: 60, Data: "www.corp.test"},
		{Name: "alias.corp.test", Type: dns.TypeCNAME, TTL: 60, Data: "web.corp.test"},
		{Name: "out.corp.test", Type: dns.TypeCNAME, TTL: 60, Data: "www.upstream.test"},
		{Name: "gone.corp.test", Type: dns.TypeCNAME, TTL: 60, Data: "nothing.corp.test"},
		{Name: "loop1.corp.test", Type: dns.TypeCNAME, TTL: 60, Data: "loop2.corp.test"},
		{Name: "loop2.corp.test", Type: dns.TypeCNAME, TTL: 60, Data: "loop1.corp.test"},
		{Name: "*.apps.corp.test", Type: dns.TypeA, TTL: 30, Data: "10.0.0.9"},
		{Name: "db.east.corp.test", Type: dns.TypeA, TTL: 30, Data: "10.0.1.1"},
	}}
}

// TestZoneLookups: authoritative answers, NXDOMAIN against NODATA, CNAME
// chains inside the zones and out of them, loops, wildcards and empty
// non-terminals.
func TestZoneLookups(t *testing.T) {
	up := startUpstream(t, "192.0.2.80", nil)
	r := newResolver(t, Options{})
	r.SetUpstreams([]netip.AddrPort{up.addr})
	if err := r.Apply(Config{Zones: []Zone{corpZone()}}); err != nil {
		t.Fatal(err)
	}
	type want struct {
		rcode   int
		answers []string // the types in order
		soa     bool     // a SOA in the authority section
		auth    bool
	}
	for _, tc := range []struct {
		q     string
		qtype uint16
		want  want
	}{
		{"www.corp.test.", dns.TypeA, want{dns.RcodeSuccess, []string{"A"}, false, true}},
		{"WWW.Corp.Test.", dns.TypeAAAA, want{dns.RcodeSuccess, []string{"AAAA"}, false, true}},
		{"www.corp.test.", dns.TypeANY, want{dns.RcodeSuccess, []string{"A", "AAAA"}, false, true}},
		{"www.corp.test.", dns.TypeMX, want{dns.RcodeSuccess, nil, true, true}},        // NODATA
		{"nothing.corp.test.", dns.TypeA, want{dns.RcodeNameError, nil, true, true}},   // NXDOMAIN
		{"corp.test.", dns.TypeA, want{dns.RcodeSuccess, nil, true, true}},             // the apex exists
		{"east.corp.test.", dns.TypeA, want{dns.RcodeSuccess, nil, true, true}},        // an empty non-terminal
		{"x.db.east.corp.test.", dns.TypeA, want{dns.RcodeNameError, nil, true, true}}, // below a leaf
		{"web.corp.test.", dns.TypeA, want{dns.RcodeSuccess, []string{"CNAME", "A"}, false, true}},
		{"alias.corp.test.", dns.TypeAAAA, want{dns.RcodeSuccess, []string{"CNAME", "CNAME", "AAAA"}, false, true}},
		{"alias.corp.test.", dns.TypeCNAME, want{dns.RcodeSuccess, []string{"CNAME"}, false, true}},
		{"web.corp.test.", dns.TypeMX, want{dns.RcodeSuccess, []string{"CNAME"}, true, true}},
		{"gone.corp.test.", dns.TypeA, want{dns.RcodeNameError, []string{"CNAME"}, true, true}},
		{"out.corp.test.", dns.TypeA, want{dns.RcodeSuccess, []string{"CNAME", "A"}, false, false}},
		{"loop1.corp.test.", dns.TypeA, want{dns.RcodeServerFailure, []string{"CNAME", "CNAME", "CNAME", "CNAME", "CNAME", "CNAME", "CNAME", "CNAME"}, false, true}},
		{"a.apps.corp.test.", dns.TypeA, want{dns.RcodeSuccess, []string{"A"}, false, true}},
		{"b.a.apps.corp.test.", dns.TypeA, want{dns.RcodeSuccess, []string{"A"}, false, true}},
		{"apps.corp.test.", dns.TypeA, want{dns.RcodeSuccess, nil, true, true}},
	} {
		t.Run(tc.q+dns.TypeToString[tc.qtype], func(t *testing.T) {
			m := query(r, tc.q, tc.qtype)
			var got want
			got.rcode, got.auth = m.Rcode, m.Authoritative
			for _, rr := range m.Answer {
				got.answers = append(got.answers, dns.TypeToString[rr.Header().Rrtype])
			}
			for _, rr := range m.Ns {
				got.soa = got.soa || rr.Header().Rrtype == dns.TypeSOA
			}
			if got.rcode != tc.want.rcode || got.soa != tc.want.soa || got.auth != tc.want.auth || len(got.answers) != len(tc.want.answers) {
				t.Fatalf("got %+v, want %+v\n%v", got, tc.want, m)
			}
			for i := range got.answers {
				if got.answers[i] != tc.want.answers[i] {
					t.Fatalf("got %+v, want %+v", got, tc.want)
				}
			}
			if len(m.Answer) > 0 && m.Answer[0].Header().Name != tc.q {
				t.Fatalf("the first answer is for %s, want the name as asked, %s", m.Answer[0].Header().Name, tc.q)
			}
		})
	}
	if m := query(r, "b.a.apps.corp.test.", dns.TypeA); firstA(m) != "10.0.0.9" {
		t.Fatalf("wildcard: %v", m)
	}
	if m := query(r, "out.corp.test.", dns.TypeA); firstA(m) != "192.0.2.80" || m.Answer[1].Header().Name != "www.upstream.test." {
		t.Fatalf("chain out of the zone: %v", m)
	}
}

// TestZonePrecedence: an authoritative zone answers before a match domain
// covering it; a non-authoritative zone hands on the names it lacks.
func TestZonePrecedence(t *testing.T) {
	up := startUpstream(t, "192.0.2.7", nil)
	for _, tc := range []struct {
		nonAuth bool
		rcode   int
		ip      string
	}{
		{false, dns.RcodeNameError, ""},
		{true, dns.RcodeSuccess, "192.0.2.7"},
	} {
		r := newResolver(t, Options{})
		z := corpZone()
		z.NonAuthoritative = tc.nonAuth
		if err := r.Apply(Config{Zones: []Zone{z}, Groups: []NameserverGroup{{Servers: []netip.AddrPort{up.addr}, Domains: []string{"corp.test"}}}}); err != nil {
			t.Fatal(err)
		}
		if m := query(r, "www.corp.test.", dns.TypeA); firstA(m) != "10.0.0.1" {
			t.Fatalf("non-authoritative %v: a name of the zone: %v", tc.nonAuth, m)
		}
		if m := query(r, "unknown.corp.test.", dns.TypeA); m.Rcode != tc.rcode || firstA(m) != tc.ip {
			t.Fatalf("non-authoritative %v: unknown name: %v", tc.nonAuth, m)
		}
	}
}

// TestBadZones: what cannot be used is reported and left out; the rest
// still answers.
func TestBadZones(t *testing.T) {
	r := newResolver(t, Options{})
	err := r.Apply(Config{Zones: []Zone{
		{Domain: "ok.test", Records: []Record{
			{Name: "a.ok.test", Type: dns.TypeA, Data: "10.0.0.1"},
			{Name: "b.ok.test", Type: dns.TypeA, Data: "fd00::1"},
			{Name: "c.ok.test", Type: dns.TypeAAAA, Data: "10.0.0.1"},
			{Name: "d.ok.test", Type: dns.TypeAAAA, Data: "::ffff:10.0.0.1"},
			{Name: "ok.test", Type: dns.TypeCNAME, Data: "elsewhere.test"},
			{Name: "e.ok.test", Type: dns.TypeCNAME, Data: "e.ok.test"},
			{Name: "a.ok.test", Type: dns.TypeCNAME, Data: "x.test"},
			{Name: "f.other.test", Type: dns.TypeA, Data: "10.0.0.2"},
			{Name: "g.ok.test", Type: dns.TypeMX, Data: "mx.ok.test"},
			{Name: "x.*.ok.test", Type: dns.TypeA, Data: "10.0.0.3"},
		}},
		{Domain: "."},
		{Domain: "bad..test"},
	}, Groups: []NameserverGroup{{Servers: []netip.AddrPort{netip.MustParseAddrPort("192.0.2.1:53")}}}})
	if err == nil {
		t.Fatal("no error for a configuration with unusable parts")
	}
	t.Log(err)
	if m := query(r, "a.ok.test.", dns.TypeA); firstA(m) != "10.0.0.1" {
		t.Fatalf("the good record was lost: %v", m)
	}
	for _, n := range []string{"b", "c", "d", "e"} {
		if m := query(r, n+".ok.test.", dns.TypeANY); m.Rcode != dns.RcodeNameError {
			t.Fatalf("%s: a bad record answered: %v", n, m)
		}
	}
	if m := query(r, "f.other.test.", dns.TypeA); len(m.Answer) != 0 {
		t.Fatalf("a record outside its zone answered: %v", m)
	}
}

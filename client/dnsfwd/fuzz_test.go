package dnsfwd

import (
	"context"
	"testing"

	"github.com/miekg/dns"

	"github.com/wiremesh/wiremesh/internal/dnsname"
)

// FuzzAnswer feeds the forwarder any bytes a peer can send: it must never
// panic, never learn an address for a name outside its routes, and always
// reply with the question's ID.
func FuzzAnswer(f *testing.F) {
	for _, name := range []string{"app.corp.test.", "db.svc.corp.test.", "other.test.", "."} {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		b, _ := q.Pack()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		q := new(dns.Msg)
		if err := q.Unpack(b); err != nil {
			return
		}
		fw, _, _, _ := newTest(t, Options{})
		m := fw.Answer(context.Background(), peerSrc, q)
		if m.Id != q.Id {
			t.Fatalf("reply ID %d, question ID %d", m.Id, q.Id)
		}
		for k := range fw.Learned() {
			if k != Key([]string{"app.corp.test"}) && k != Key([]string{"*.svc.corp.test"}) {
				t.Fatalf("learned for %q", k)
			}
		}
		if len(m.Answer) > 0 && len(q.Question) == 1 {
			n := dnsname.Normalize(q.Question[0].Name)
			if !dnsname.Covers("app.corp.test", n) && !dnsname.Covers("*.svc.corp.test", n) {
				t.Fatalf("answered %q, a name outside the routes", n)
			}
		}
	})
}

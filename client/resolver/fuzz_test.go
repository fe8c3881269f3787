package resolver

import (
	"testing"

	"github.com/miekg/dns"
)

// FuzzServe feeds bytes down the server's packet path: what the server's
// accept function or the parser rejects is dropped (or answered by
// miekg/dns itself), everything else gets exactly one reply that packs,
// carries the question's ID and fits what the client takes (512 bytes,
// or its EDNS0 size up to serverUDPSize). No upstream is set, so nothing
// leaves the process.
func FuzzServe(f *testing.F) {
	seeds := []*dns.Msg{
		ask("www.corp.test.", dns.TypeA), ask("alias.corp.test.", dns.TypeAAAA), ask("loop1.corp.test.", dns.TypeA),
		ask("x.apps.corp.test.", dns.TypeANY), ask("out.corp.test.", dns.TypeA), ask("example.org.", dns.TypeMX),
	}
	edns := ask("www.corp.test.", dns.TypeANY)
	edns.SetEdns0(4096, true)
	seeds = append(seeds, edns)
	for _, q := range seeds {
		b, _ := q.Pack()
		f.Add(b)
	}
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1}) // a compression loop
	r := newResolver(f, Options{})
	if err := r.Apply(Config{Zones: []Zone{corpZone()}}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h dns.Header
		if len(b) < 12 {
			return
		}
		h.Id = uint16(b[0])<<8 | uint16(b[1])
		h.Bits = uint16(b[2])<<8 | uint16(b[3])
		h.Qdcount = uint16(b[4])<<8 | uint16(b[5])
		h.Ancount = uint16(b[6])<<8 | uint16(b[7])
		h.Nscount = uint16(b[8])<<8 | uint16(b[9])
		h.Arcount = uint16(b[10])<<8 | uint16(b[11])
		if dns.DefaultMsgAcceptFunc(h) != dns.MsgAccept {
			return // the server answers or drops these before the handler
		}
		q := new(dns.Msg)
		if err := q.Unpack(b); err != nil {
			return
		}
		w := udpFrom("100.64.0.2")
		r.ServeDNS(w, q)
		if len(w.msgs) != 1 {
			t.Fatalf("%d replies", len(w.msgs))
		}
		m := w.msgs[0]
		if m.Id != q.Id {
			t.Fatalf("reply id %d for question %d", m.Id, q.Id)
		}
		size := dns.MinMsgSize
		if o := q.IsEdns0(); o != nil {
			size = min(max(int(o.UDPSize()), dns.MinMsgSize), serverUDPSize)
		}
		if m.Len() > size {
			t.Fatalf("a %d-byte reply for a client that takes %d", m.Len(), size)
		}
	})
}

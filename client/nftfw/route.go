//go:build linux

package nftfw

import (
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/wiremesh/wiremesh/client/acl"
)

// addForward fills the forward chain for packets from the interface:
// established flows pass; a packet for one of the routed networks jumps
// to the routed chain (route rules, then drop); anything else from the
// interface is dropped, so this host is never a transit hop for a peer.
// Packets towards the interface (a LAN answering, or opening a flow to a
// peer) keep the chain's accept policy.
func (f *Firewall) addForward(fwd, routed *nftables.Chain, inIf []expr.Any, add func(*nftables.Chain, ...[]expr.Any)) {
	// Another peer's overlay address is never forwarded to, whatever a
	// routed 0.0.0.0/0 or ::/0 contains: a peer management left out of
	// the other's map would reach it through this one.
	for _, o := range []netip.Prefix{f.overlay, f.overlay6} {
		if o.IsValid() {
			add(fwd, inIf, prefixMatch(o, false), []expr.Any{&expr.Counter{}}, verdict(expr.VerdictDrop))
		}
	}
	add(fwd, inIf, established(), verdict(expr.VerdictAccept))
	for _, n := range f.routing.Networks {
		add(fwd, inIf, prefixMatch(n, false), []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: routed.Name}})
	}
	add(fwd, inIf, []expr.Any{&expr.Counter{}}, verdict(expr.VerdictDrop))

	if f.routing.AllowAll {
		add(routed, verdict(expr.VerdictAccept))
		return
	}
	for _, accept := range []bool{false, true} { // drop rules first, as in package acl
		for _, r := range f.routing.Rules {
			if r.Accept != accept {
				continue
			}
			v := verdict(expr.VerdictDrop)
			if accept {
				v = verdict(expr.VerdictAccept)
			}
			for _, m := range routeMatches(r) {
				add(routed, m, v)
			}
		}
	}
	add(routed, []expr.Any{&expr.Counter{}}, verdict(expr.VerdictDrop))
}

// routeMatches is r as nftables expressions: one match per source,
// destination and protocol combination of one address family.
func routeMatches(r acl.RouteRule) [][]expr.Any {
	srcs := r.Sources
	if len(srcs) == 0 {
		srcs = []netip.Prefix{{}} // any source
	}
	var out [][]expr.Any
	for _, d := range r.Dests {
		for _, s := range srcs {
			if s.IsValid() && s.Addr().Is4() != d.Addr().Is4() {
				continue // never both: no packet has them
			}
			var base []expr.Any
			if s.IsValid() {
				base = append(base, prefixMatch(s, true)...)
			}
			base = append(base, prefixMatch(d, false)...)
			proto := r.Proto
			if proto == acl.ProtoICMP && !d.Addr().Is4() {
				proto = unix.IPPROTO_ICMPV6 // the rules' one ICMP covers both families
			}
			for _, m := range matches(acl.Rule{Proto: proto, PortLo: r.PortLo, PortHi: r.PortHi}, true) {
				out = append(out, append(append([]expr.Any(nil), base...), m...))
			}
		}
	}
	return out
}

// prefixMatch matches packets whose source (src) or destination address
// is in p, of p's address family only.
func prefixMatch(p netip.Prefix, src bool) []expr.Any {
	p = p.Masked()
	proto, off, n := byte(unix.NFPROTO_IPV4), uint32(16), 4
	if src {
		off = 12
	}
	if !p.Addr().Is4() {
		proto, off, n = unix.NFPROTO_IPV6, 24, 16
		if src {
			off = 8
		}
	}
	e := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
	if p.Bits() == 0 {
		return e // the whole family (an exit node)
	}
	e = append(e, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(n)})
	if p.Bits() < n*8 {
		m := make([]byte, n)
		for i := 0; i < p.Bits(); i++ {
			m[i/8] |= 0x80 >> (i % 8)
		}
		e = append(e, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: uint32(n), Mask: m, Xor: make([]byte, n)})
	}
	return append(e, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Addr().AsSlice()})
}

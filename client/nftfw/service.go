//go:build linux

package nftfw

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"

	"github.com/wiremesh/wiremesh/client/acl"
)

// SetServices replaces the ports of this host open to every map peer
// whatever the rules say (package acl's Services: the SSH server, which
// refuses peers without a policy itself and says why). On error the
// previous table stays.
func (f *Firewall) SetServices(s acl.Services) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev := f.services
	f.services = acl.Services{Ports: append([]netip.AddrPort(nil), s.Ports...), Peers: append([]netip.Addr(nil), s.Peers...)}
	if err := f.install(); err != nil {
		f.services = prev
		return err
	}
	return nil
}

// addServices adds to chain in the rules of f.services: per family, one
// constant set of the peers' addresses (inside the overlay, as the peer
// rules admit them) and one rule per listened address and port, so the
// rule count does not grow with the map. f.mu held.
func (f *Firewall) addServices(c *nftables.Conn, in *nftables.Chain, inIf []expr.Any, add func(*nftables.Chain, ...[]expr.Any)) error {
	if len(f.services.Ports) == 0 {
		return nil
	}
	// A set no rule uses is refused by the kernel: only the families
	// listened on get one.
	listens := map[bool]bool{}
	for _, p := range f.services.Ports {
		listens[p.Addr().Unmap().Is4()] = true
	}
	var v4, v6 []nftables.SetElement
	seen := map[netip.Addr]bool{}
	for _, a := range f.services.Peers {
		a = a.Unmap()
		ov := f.overlay
		if a.Is6() {
			ov = f.overlay6
		}
		if seen[a] || !a.IsValid() || (f.overlay.IsValid() && (!ov.IsValid() || !ov.Contains(a))) {
			continue
		}
		seen[a] = true
		if a.Is4() {
			v4 = append(v4, nftables.SetElement{Key: a.AsSlice()})
		} else {
			v6 = append(v6, nftables.SetElement{Key: a.AsSlice()})
		}
	}
	sets := map[bool]*nftables.Set{}
	for is4, elems := range map[bool][]nftables.SetElement{true: v4, false: v6} {
		if len(elems) == 0 || !listens[is4] {
			continue
		}
		s := &nftables.Set{Table: f.table, Anonymous: true, Constant: true, KeyType: nftables.TypeIP6Addr}
		if is4 {
			s.KeyType = nftables.TypeIPAddr
		}
		if err := c.AddSet(s, elems); err != nil {
			return fmt.Errorf("nftables: service peers: %w", err)
		}
		sets[is4] = s
	}
	for _, p := range f.services.Ports {
		addr := p.Addr().Unmap()
		s := sets[addr.Is4()]
		if s == nil {
			continue
		}
		srcOff, n := uint32(12), uint32(4)
		if !addr.Is4() {
			srcOff, n = 8, 16
		}
		src := []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: srcOff, Len: n},
			&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID},
		}
		port := []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{acl.ProtoTCP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(p.Port())},
		}
		// prefixMatch checks the family before the address is read.
		add(in, inIf, prefixMatch(netip.PrefixFrom(addr, addr.BitLen()), false), src, port, verdict(expr.VerdictAccept))
	}
	return nil
}

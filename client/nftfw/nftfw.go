//go:build linux

package nftfw

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/wiremesh/wiremesh/client/acl"
)

// Firewall owns one nftables table (inet family, named after the
// interface). Every change replaces the whole table in one transaction,
// so no packet ever sees half a rule set.
type Firewall struct {
	iface string
	table *nftables.Table

	mu sync.Mutex
	// what the table holds, each part set by its own method
	rules    []acl.Rule
	allowAll bool
	overlay  netip.Prefix
	overlay6 netip.Prefix // the IPv6 overlay; zero: no IPv6 source is a peer
	routing  acl.Routing
	services acl.Services // service.go
}

// New installs the table for iface, accepting everything until SetRules
// (as acl.New does). It fails when the kernel or the process cannot use
// nftables (no nf_tables, no CAP_NET_ADMIN).
func New(iface string) (*Firewall, error) {
	if len(iface) >= unix.IFNAMSIZ || iface == "" {
		return nil, fmt.Errorf("nftables: bad interface name %q", iface)
	}
	f := &Firewall{iface: iface, table: &nftables.Table{Family: nftables.TableFamilyINet, Name: "wiremesh-" + iface}}
	if err := f.SetRules(nil, true); err != nil {
		return nil, err
	}
	return f, nil
}

// Table is the nftables table's name.
func (f *Firewall) Table() string { return f.table.Name }

// SetRules replaces the peer rules; allowAll admits every inbound packet
// that no drop rule matches. On error the previous table stays.
func (f *Firewall) SetRules(rules []acl.Rule, allowAll bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	prevRules, prevAll := f.rules, f.allowAll
	f.rules, f.allowAll = append([]acl.Rule(nil), rules...), allowAll
	if err := f.install(); err != nil {
		f.rules, f.allowAll = prevRules, prevAll
		return err
	}
	return nil
}

// SetOverlay sets the overlay network: allow-all and any-peer rules then
// admit sources inside it only, so a routed network (a routing peer's
// LAN) gets in only with replies to what this host opened.
func (f *Firewall) SetOverlay(overlay netip.Prefix) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev := f.overlay
	f.overlay = overlay.Masked()
	if err := f.install(); err != nil {
		f.overlay = prev
		return err
	}
	return nil
}

// SetOverlay6 sets the IPv6 overlay network, as SetOverlay does the IPv4
// one. The zero Prefix (no IPv6 address) admits no IPv6 peer once the
// IPv4 overlay is set: only replies to what this host opened.
func (f *Firewall) SetOverlay6(overlay netip.Prefix) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev := f.overlay6
	f.overlay6 = overlay.Masked()
	if err := f.install(); err != nil {
		f.overlay6 = prev
		return err
	}
	return nil
}

// SetRouting replaces what the forward chain lets through from the
// interface (package acl's Routing: nothing without routed networks).
func (f *Firewall) SetRouting(r acl.Routing) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev := f.routing
	f.routing = r
	if err := f.install(); err != nil {
		f.routing = prev
		return err
	}
	return nil
}

// install replaces the table with what f holds. f.mu held.
func (f *Firewall) install() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	// add + delete + add: replaces a table that exists, creates one that
	// does not, in the same transaction as the new rules.
	c.AddTable(f.table)
	c.DelTable(f.table)
	c.AddTable(f.table)
	accept := nftables.ChainPolicyAccept
	chain := func(name string, hook *nftables.ChainHook) *nftables.Chain {
		ch := &nftables.Chain{Name: name, Table: f.table}
		if hook != nil {
			ch.Type, ch.Hooknum, ch.Priority, ch.Policy = nftables.ChainTypeFilter, hook, nftables.ChainPriorityFilter, &accept
		}
		return c.AddChain(ch)
	}
	in, fwd, out := chain("input", nftables.ChainHookInput), chain("forward", nftables.ChainHookForward), chain("output", nftables.ChainHookOutput)
	var inDrop, inAccept, outDrop []acl.Rule
	for _, r := range f.rules {
		switch {
		case r.Inbound && !r.Accept:
			inDrop = append(inDrop, r)
		case r.Inbound:
			inAccept = append(inAccept, r)
		case !r.Accept:
			outDrop = append(outDrop, r)
		}
	}
	inIf, outIf := ifname(expr.MetaKeyIIFNAME, f.iface), ifname(expr.MetaKeyOIFNAME, f.iface)
	add := func(ch *nftables.Chain, exprs ...[]expr.Any) {
		var all []expr.Any
		for _, e := range exprs {
			all = append(all, e...)
		}
		c.AddRule(&nftables.Rule{Table: f.table, Chain: ch, Exprs: all})
	}
	// Peers' own addresses only, once the overlay is known: one source
	// match per overlay (IPv4, and IPv6 when this peer has an address
	// there); before, any source (nil).
	fromOverlay := [][]expr.Any{nil}
	if f.overlay.IsValid() {
		fromOverlay = [][]expr.Any{prefixMatch(f.overlay, true)}
		if f.overlay6.IsValid() {
			fromOverlay = append(fromOverlay, prefixMatch(f.overlay6, true))
		}
	}
	for _, r := range inDrop {
		for _, m := range peerMatches(r, true) {
			add(in, inIf, m, verdict(expr.VerdictDrop))
		}
	}
	add(in, inIf, established(), verdict(expr.VerdictAccept))
	if err := f.addServices(c, in, inIf, add); err != nil {
		return err
	}
	if f.allowAll {
		for _, src := range fromOverlay {
			add(in, inIf, src, verdict(expr.VerdictAccept))
		}
	} else {
		for _, r := range inAccept {
			for _, m := range peerMatches(r, true) {
				for _, src := range fromOverlay {
					add(in, inIf, src, m, verdict(expr.VerdictAccept))
				}
			}
		}
	}
	add(in, inIf, []expr.Any{&expr.Counter{}}, verdict(expr.VerdictDrop))
	f.addForward(fwd, chain("routed", nil), inIf, add)
	for _, r := range outDrop {
		for _, m := range peerMatches(r, false) {
			add(out, outIf, m, verdict(expr.VerdictDrop))
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: install table %s: %w", f.table.Name, err)
	}
	return nil
}

// Close removes the table.
func (f *Firewall) Close() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	c.DelTable(f.table)
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("nftables: remove table %s: %w", f.table.Name, err)
	}
	return nil
}

func ifname(k expr.MetaKey, name string) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{&expr.Meta{Key: k, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b}}
}

func verdict(k expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: k}} }

// established matches packets of connections already accepted (replies
// to what the host opened, and what follows an accepted first packet).
func established() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}
}

// peerMatches is a peer rule as nftables expressions: the rules' one
// ICMP is ICMPv6 for an IPv6 peer and both for any peer (as in package
// acl, which reads ICMPv6 as ICMP).
func peerMatches(r acl.Rule, fromPeer bool) [][]expr.Any {
	if r.Proto != acl.ProtoICMP {
		return matches(r, fromPeer)
	}
	peer := r.Peer.Unmap()
	if peer.IsValid() && !peer.IsUnspecified() {
		if peer.Is6() {
			r.Proto = unix.IPPROTO_ICMPV6
		}
		return matches(r, fromPeer)
	}
	v6 := r
	v6.Proto = unix.IPPROTO_ICMPV6
	return append(matches(r, fromPeer), matches(v6, fromPeer)...)
}

// matches is r as nftables expressions; a rule with ports but any
// protocol becomes one match for TCP and one for UDP (ports exist only
// there, as in package acl). fromPeer: the peer is the packet's source.
func matches(r acl.Rule, fromPeer bool) [][]expr.Any {
	var base []expr.Any
	if peer := r.Peer.Unmap(); peer.IsValid() && !peer.IsUnspecified() {
		base = prefixMatch(netip.PrefixFrom(peer, peer.BitLen()), fromPeer)
	}
	ports := r.PortLo != 0 || r.PortHi != 0
	protos := []uint8{r.Proto}
	if r.Proto == acl.ProtoAny && ports {
		protos = []uint8{acl.ProtoTCP, acl.ProtoUDP}
	}
	var out [][]expr.Any
	for _, p := range protos {
		m := append([]expr.Any(nil), base...)
		if p != acl.ProtoAny {
			m = append(m, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}})
		}
		if ports && (p == acl.ProtoTCP || p == acl.ProtoUDP) {
			hi := max(r.PortHi, r.PortLo)
			m = append(m,
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: binaryutil.BigEndian.PutUint16(r.PortLo), ToData: binaryutil.BigEndian.PutUint16(hi)},
			)
		} else if ports {
			continue // ports on ICMP match nothing
		}
		out = append(out, m)
	}
	return out
}

//go:build linux

package nftfw

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// NAT owns the table masquerading what a routing peer forwards from the
// overlay: in both data plane modes the kernel forwards routed packets,
// so the kernel's NAT rewrites them.
type NAT struct {
	iface string
	table *nftables.Table
}

// NATTable is the name of the NAT table for iface.
func NATTable(iface string) string { return "wiremesh-nat-" + iface }

// NewNAT returns the NAT of iface; nothing is installed before Set.
func NewNAT(iface string) (*NAT, error) {
	if len(iface) >= unix.IFNAMSIZ || iface == "" {
		return nil, fmt.Errorf("nftables: bad interface name %q", iface)
	}
	return &NAT{iface: iface, table: &nftables.Table{Family: nftables.TableFamilyINet, Name: NATTable(iface)}}, nil
}

// Set masquerades packets from the overlay of a network's address family
// (overlays: at most one per family) to each of networks that leave by
// another interface than the WireGuard one, replacing what was there in
// one transaction. A network of a family no overlay has gets no rule: no
// peer sends from there. No networks removes the table.
func (n *NAT) Set(overlays []netip.Prefix, networks []netip.Prefix) error {
	if len(networks) == 0 {
		return n.Close()
	}
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	c.AddTable(n.table)
	c.DelTable(n.table)
	c.AddTable(n.table)
	accept := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{Name: "postrouting", Table: n.table, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept})
	// Leaving by the tunnel: a peer talking to a peer, never rewritten.
	notOut := []expr.Any{&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ifnameBytes(n.iface)}}
	for _, nw := range networks {
		i := slices.IndexFunc(overlays, func(o netip.Prefix) bool { return o.IsValid() && o.Addr().Is4() == nw.Addr().Is4() })
		if i < 0 {
			continue
		}
		var e []expr.Any
		e = append(e, prefixMatch(overlays[i].Masked(), true)...)
		e = append(e, prefixMatch(nw, false)...)
		e = append(e, notOut...)
		e = append(e, &expr.Counter{}, &expr.Masq{})
		c.AddRule(&nftables.Rule{Table: n.table, Chain: ch, Exprs: e})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: install table %s: %w", n.table.Name, err)
	}
	return nil
}

// Close removes the table (nothing to do when it is not there).
func (n *NAT) Close() error { return RemoveTable(n.table.Name) }

// RemoveTable deletes an inet table of ours by name, e.g. one a crashed
// run left; a missing table is not an error.
func RemoveTable(name string) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	c.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: name})
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("nftables: remove table %s: %w", name, err)
	}
	return nil
}

func ifnameBytes(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

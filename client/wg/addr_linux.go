package wg

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// SetAddress assigns the overlay address (its prefix length routes the
// overlay network to the interface) and brings the link up.
func (d *Device) SetAddress(p netip.Prefix, mtu int) error { return setAddress(d.name, p, mtu) }

func setAddress(name string, p netip.Prefix, mtu int) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("find interface %s: %w", name, err)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("list addresses of %s: %w", name, err)
	}
	for _, a := range addrs {
		if a.IPNet.String() != p.String() {
			_ = netlink.AddrDel(link, &a)
		}
	}
	addr, err := netlink.ParseAddr(p.String())
	if err != nil {
		return err
	}
	if err := netlink.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("set address %s on %s: %w", p, name, err)
	}
	if mtu > 0 {
		_ = netlink.LinkSetMTU(link, mtu)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("bring %s up: %w", name, err)
	}
	return nil
}

package wg

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
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

// SetAddress6 assigns the IPv6 overlay address beside the IPv4 one (its
// prefix length routes the IPv6 overlay to the interface); the zero
// Prefix removes it. Link-local addresses the kernel adds stay.
func (d *Device) SetAddress6(p netip.Prefix) error { return setAddress6(d.name, p) }

func setAddress6(name string, p netip.Prefix) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("find interface %s: %w", name, err)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V6)
	if err != nil {
		return fmt.Errorf("list IPv6 addresses of %s: %w", name, err)
	}
	for _, a := range addrs {
		if a.IP.IsLinkLocalUnicast() || (p.IsValid() && a.IPNet.String() == p.String()) {
			continue
		}
		if err := netlink.AddrDel(link, &a); err != nil {
			return fmt.Errorf("remove IPv6 address %s from %s: %w", a.IPNet, name, err)
		}
	}
	if !p.IsValid() {
		return nil
	}
	addr, err := netlink.ParseAddr(p.String())
	if err != nil {
		return err
	}
	// No duplicate address detection: WireGuard is layer 3, no neighbour
	// could answer, and DAD would keep the address tentative (unusable)
	// for a second or more.
	addr.Flags |= unix.IFA_F_NODAD
	if err := netlink.AddrReplace(link, addr); err != nil {
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return fmt.Errorf("set IPv6 address %s on %s: %w (IPv6 is disabled on this host or interface: sysctl net.ipv6.conf.all.disable_ipv6; or run netbird up --disable-ipv6)", p, name, err)
		}
		return fmt.Errorf("set IPv6 address %s on %s: %w", p, name, err)
	}
	return nil
}

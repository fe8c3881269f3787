package wg

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
)

// SetAddress assigns the overlay address to the wintun adapter with
// netsh (the prefix length routes the overlay network to it) and sets the
// MTU.
func (d *Device) SetAddress(p netip.Prefix, mtu int) error {
	mask := net.IP(net.CIDRMask(p.Bits(), 32)).String()
	if out, err := exec.Command("netsh", "interface", "ipv4", "set", "address", "name="+d.name, "static", p.Addr().String(), mask).CombinedOutput(); err != nil {
		return fmt.Errorf("set address %s on %s: %w: %s", p, d.name, err, out)
	}
	if mtu > 0 {
		_ = exec.Command("netsh", "interface", "ipv4", "set", "subinterface", d.name, "mtu="+strconv.Itoa(mtu), "store=active").Run()
	}
	return nil
}

// SetAddress6 assigns the IPv6 overlay address to the wintun adapter with
// netsh (the prefix length routes the IPv6 overlay to it); the zero
// Prefix removes what it set.
func (d *Device) SetAddress6(p netip.Prefix) error {
	d.mu6.Lock()
	defer d.mu6.Unlock()
	if old := d.addr6; old.IsValid() && old != p {
		_ = exec.Command("netsh", "interface", "ipv6", "delete", "address", "interface="+d.name, "address="+old.Addr().String()).Run()
	}
	d.addr6 = netip.Prefix{}
	if !p.IsValid() {
		return nil
	}
	if out, err := exec.Command("netsh", "interface", "ipv6", "add", "address", "interface="+d.name, "address="+p.String(), "store=active").CombinedOutput(); err != nil {
		return fmt.Errorf("set IPv6 address %s on %s: %w: %s", p, d.name, err, out)
	}
	d.addr6 = p
	return nil
}

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

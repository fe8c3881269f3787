package wg

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
)

// SetAddress assigns the overlay address to the utun interface (a
// point-to-point link on macOS), routes the overlay network to it and sets
// the MTU, with ifconfig and route as the system provides them.
func (d *Device) SetAddress(p netip.Prefix, mtu int) error {
	ip := p.Addr().String()
	if out, err := exec.Command("ifconfig", d.name, "inet", ip+"/"+strconv.Itoa(p.Bits()), ip, "alias").CombinedOutput(); err != nil {
		return fmt.Errorf("set address %s on %s: %w: %s", p, d.name, err, out)
	}
	if mtu > 0 {
		_ = exec.Command("ifconfig", d.name, "mtu", strconv.Itoa(mtu)).Run()
	}
	if out, err := exec.Command("ifconfig", d.name, "up").CombinedOutput(); err != nil {
		return fmt.Errorf("bring %s up: %w: %s", d.name, err, out)
	}
	_ = exec.Command("route", "-q", "-n", "delete", "-inet", p.Masked().String(), "-interface", d.name).Run()
	if out, err := exec.Command("route", "-q", "-n", "add", "-inet", p.Masked().String(), "-interface", d.name).CombinedOutput(); err != nil {
		return fmt.Errorf("route %s to %s: %w: %s", p.Masked(), d.name, err, out)
	}
	return nil
}

// SetAddress6 assigns the IPv6 overlay address to the utun interface and
// routes the IPv6 overlay to it; the zero Prefix removes what it set.
func (d *Device) SetAddress6(p netip.Prefix) error {
	d.mu6.Lock()
	defer d.mu6.Unlock()
	set, err := setAddress6Darwin(func(name string, args ...string) ([]byte, error) {
		return exec.Command(name, args...).CombinedOutput()
	}, d.name, d.addr6, p)
	d.addr6 = set
	return err
}

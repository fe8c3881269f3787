package wg

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
)

// runCmd runs a command and returns its combined output; tests record
// the command lines instead.
type runCmd func(name string, args ...string) ([]byte, error)

// setAddress6Darwin moves utun iface's IPv6 overlay address from old to p
// (the zero Prefix: none) with ifconfig and route, and returns what is
// set afterwards. A route that cannot be added takes the alias back out:
// the address recorded as unset must not stay on the interface, where
// nothing would remove it. Kept free of darwin build tags so its command
// sequence is tested everywhere.
func setAddress6Darwin(run runCmd, iface string, old, p netip.Prefix) (netip.Prefix, error) {
	if old.IsValid() && old != p {
		_, _ = run("ifconfig", iface, "inet6", old.Addr().String(), "delete")
		_, _ = run("route", "-q", "-n", "delete", "-inet6", old.Masked().String(), "-interface", iface)
	}
	if !p.IsValid() {
		return netip.Prefix{}, nil
	}
	if out, err := run("ifconfig", iface, "inet6", p.Addr().String(), "prefixlen", strconv.Itoa(p.Bits()), "alias"); err != nil {
		return netip.Prefix{}, fmt.Errorf("set IPv6 address %s on %s: %w: %s", p, iface, err, out)
	}
	_, _ = run("route", "-q", "-n", "delete", "-inet6", p.Masked().String(), "-interface", iface)
	if out, err := run("route", "-q", "-n", "add", "-inet6", p.Masked().String(), "-interface", iface); err != nil {
		err = fmt.Errorf("route %s to %s: %w: %s", p.Masked(), iface, err, out)
		if dout, derr := run("ifconfig", iface, "inet6", p.Addr().String(), "delete"); derr != nil {
			err = errors.Join(err, fmt.Errorf("remove IPv6 address %s again: %w: %s", p, derr, dout))
		}
		return netip.Prefix{}, err
	}
	return p, nil
}

package engine

import (
	"net/netip"
)

// overlay6Setter is a firewall that filters the IPv6 overlay too (both of
// ours do): it learns this peer's IPv6 address and the IPv6 overlay, so
// that only sources inside it count as peers.
type overlay6Setter interface {
	SetOverlay6(local netip.Addr, overlay netip.Prefix)
}

// addr6Setter is an interface that takes an IPv6 address.
type addr6Setter interface {
	SetAddress6(p netip.Prefix) error
}

// setAddress6 moves the interface to the IPv6 overlay address p (the zero
// Prefix removes it), in place: NetBird restarts its whole engine when
// address_v6 changes, which cuts every peer connection; replacing the
// address keeps the tunnels, and the peers learn the new /128 from their
// maps. When the address cannot be set (IPv6 disabled in the kernel), the
// peer stays on the IPv4 overlay and says why. e.mu held, or the engine
// not yet running.
func (e *Engine) setAddress6(p netip.Prefix) {
	e.want6 = p
	if e.o.DisableIPv6 && p.IsValid() {
		// An older server that ignores the flag and the capability.
		e.log.Warn("management assigned an IPv6 overlay address, not used (--disable-ipv6)", "address_v6", p)
		p = netip.Prefix{}
	}
	e.addr6Err = ""
	dev, ok := e.dev.(addr6Setter)
	if !ok {
		if p.IsValid() {
			e.log.Warn("this interface takes no IPv6 address: staying on the IPv4 overlay", "address_v6", p)
			e.addr6Err = "this interface takes no IPv6 address"
		}
		p = netip.Prefix{}
	} else if err := dev.SetAddress6(p); err != nil {
		e.log.Error("IPv6 overlay address not set: only IPv4 peers' traffic reaches this peer", "err", err)
		e.addr6Err = err.Error()
		p = netip.Prefix{}
		_ = dev.SetAddress6(p)
	}
	if p == e.addr6 {
		return
	}
	e.addr6 = p
	if f, ok := e.filter.(overlay6Setter); ok {
		if p.IsValid() {
			f.SetOverlay6(p.Addr(), p.Masked())
		} else {
			f.SetOverlay6(netip.Addr{}, netip.Prefix{})
		}
	}
	if e.srv != nil {
		e.srv.setOverlay6(p)
	}
	if p.IsValid() {
		e.log.Info("IPv6 overlay address set", "interface", e.dev.Name(), "address_v6", p)
	} else {
		e.log.Info("no IPv6 overlay address", "interface", e.dev.Name())
	}
}

// syncAddress6 applies a map's address_v6 when it differs from the one
// last asked for: compared with the one set, an address the interface
// refused would be tried (and logged) again on every map. e.mu held.
func (e *Engine) syncAddress6(p netip.Prefix) {
	if p != e.want6 {
		e.setAddress6(p)
	}
}

// ipv6Mode is the IPv6 line of `netbird status -d`. e.mu held.
func (e *Engine) ipv6Mode() string {
	switch {
	case e.o.DisableIPv6:
		return "disabled (--disable-ipv6)"
	case e.addr6Err != "":
		return "address not set: " + e.addr6Err
	case e.addr6.IsValid():
		return "on"
	}
	return "no address assigned (this peer is in none of the account's IPv6 groups, or the server has no IPv6 overlay)"
}

// peerIPs is a remote peer's overlay addresses for a status report: the
// first IPv4 host of its allowed IPs, and its IPv6 /128.
func peerIPs(ips []netip.Prefix) (v4, v6 string) {
	for _, p := range ips {
		switch {
		case v4 == "" && p.Addr().Is4() && p.Bits() == 32:
			v4 = p.Addr().String()
		case v6 == "" && p.Addr().Is6() && p.Bits() == 128:
			v6 = p.Addr().String()
		}
	}
	if v4 == "" && len(ips) > 0 && ips[0].Addr().Is4() {
		v4 = ips[0].Addr().String()
	}
	return v4, v6
}

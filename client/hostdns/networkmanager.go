package hostdns

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/godbus/dbus/v5"
)

const (
	nmDest   = "org.freedesktop.NetworkManager"
	nmPath   = dbus.ObjectPath("/org/freedesktop/NetworkManager")
	nmDevice = "org.freedesktop.NetworkManager.Device"
)

// NetworkManager's dns-priority values (lower wins; negative excludes
// the other connections' servers): the agent's resolver takes every query
// when a primary group exists, and otherwise shares with the LAN, ahead
// of it for match domains.
const (
	nmPriorityPrimary    int32 = -500
	nmPriorityMatch      int32 = 0
	nmPrioritySearchOnly int32 = 50
)

// nmSettings is a connection's a{sa{sv}} as GetAppliedConnection returns it.
type nmSettings map[string]map[string]dbus.Variant

// networkManager sets DNS on the overlay device's applied connection
// (GetAppliedConnection, edit, Reapply): NetworkManager then writes the
// server and domains into the resolv.conf it owns. The change lives only
// in the applied (not the saved) connection, so it goes with the device;
// restore removes it while the device still exists.
type networkManager struct {
	iface string
	bus   BusDialer
}

func (n *networkManager) mode() Mode { return ModeNetworkManager }

// nmDNS edits s for c: the server in the address family's section, the
// search and routing domains, the priority; the other family's DNS keys
// are removed so no stale server stays.
func nmDNS(s nmSettings, c Config) {
	a := c.Server.Addr().Unmap()
	key, stale := "ipv4", "ipv6"
	if a.Is6() {
		key, stale = "ipv6", "ipv4"
	}
	if s[key] == nil {
		s[key] = map[string]dbus.Variant{}
	}
	if a.Is4() {
		b := a.As4()
		// NetworkManager's ipv4.dns is a list of in_addr_t: the address
		// bytes in memory order, so the uint32 is read in the host's own
		// byte order (D-Bus then carries the value, not the bytes).
		s[key]["dns"] = dbus.MakeVariant([]uint32{binary.NativeEndian.Uint32(b[:])})
	} else {
		b := a.As16()
		s[key]["dns"] = dbus.MakeVariant([][]byte{b[:]})
	}
	var search, match []string
	for _, d := range c.Domains {
		n := trimDot(d.Name)
		if n == "" {
			continue
		}
		if d.MatchOnly {
			match = append(match, "~"+n)
		} else {
			search = append(search, n)
		}
	}
	doms := append(search, match...)
	prio := nmPrioritySearchOnly
	switch {
	case c.RouteAll:
		prio = nmPriorityPrimary
		doms = append(doms, "~.")
	case len(match) > 0:
		prio = nmPriorityMatch
	}
	if doms == nil {
		doms = []string{}
	}
	s[key]["dns-search"] = dbus.MakeVariant(doms)
	s[key]["dns-priority"] = dbus.MakeVariant(prio)
	nmClear(s, stale)
}

func nmClear(s nmSettings, key string) {
	for _, k := range []string{"dns", "dns-search", "dns-priority"} {
		delete(s[key], k)
	}
}

// nmReapplicable drops what GetAppliedConnection returns but Reapply
// refuses (deprecated duplicates of the address and route lists).
func nmReapplicable(s nmSettings) {
	for _, k := range []string{"ipv4", "ipv6"} {
		delete(s[k], "addresses")
		delete(s[k], "routes")
	}
}

func (n *networkManager) edit(ctx context.Context, f func(nmSettings)) error {
	conn, err := n.bus(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var dev dbus.ObjectPath
	if err := conn.Object(nmDest, nmPath).CallWithContext(ctx, nmDest+".GetDeviceByIpIface", 0, n.iface).Store(&dev); err != nil {
		return fmt.Errorf("NetworkManager device %s: %w", n.iface, err)
	}
	obj := conn.Object(nmDest, dev)
	var s nmSettings
	var version uint64
	if err := obj.CallWithContext(ctx, nmDevice+".GetAppliedConnection", 0, uint32(0)).Store(&s, &version); err != nil {
		return fmt.Errorf("NetworkManager applied connection of %s: %w", n.iface, err)
	}
	nmReapplicable(s)
	f(s)
	if err := obj.CallWithContext(ctx, nmDevice+".Reapply", 0, s, version, uint32(0)).Err; err != nil {
		return fmt.Errorf("NetworkManager reapply on %s: %w", n.iface, err)
	}
	return nil
}

func (n *networkManager) apply(ctx context.Context, c Config) error {
	if c.Server.Port() != 53 {
		return fmt.Errorf("NetworkManager cannot name a DNS port (%d): %w", c.Server.Port(), ErrUnavailable)
	}
	return n.edit(ctx, func(s nmSettings) { nmDNS(s, c) })
}

func (n *networkManager) restore(ctx context.Context) error {
	err := n.edit(ctx, func(s nmSettings) { nmClear(s, "ipv4"); nmClear(s, "ipv6") })
	if err != nil && !interfaceExists(n.iface) {
		return nil // the device went, and its applied settings with it
	}
	return err
}

// upstreams: NetworkManager keeps the other connections' servers in use
// for everything but the mesh's domains (or, with a primary group, the
// agent's resolver reads them from the resolv.conf NetworkManager
// writes, which the resolver's own start-up handles).
func (n *networkManager) upstreams(context.Context) []netip.AddrPort { return nil }

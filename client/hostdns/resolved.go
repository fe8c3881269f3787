package hostdns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/godbus/dbus/v5"
)

// BusDialer opens a private connection to the system bus; the caller
// closes it.
type BusDialer func(ctx context.Context) (*dbus.Conn, error)

// SystemBus connects to the system bus (/run/dbus/system_bus_socket or
// DBUS_SYSTEM_BUS_ADDRESS).
func SystemBus(ctx context.Context) (*dbus.Conn, error) {
	c, err := dbus.ConnectSystemBus(dbus.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("system bus: %w: %w", ErrUnavailable, err)
	}
	return c, nil
}

const (
	resolvedDest    = "org.freedesktop.resolve1"
	resolvedPath    = dbus.ObjectPath("/org/freedesktop/resolve1")
	resolvedManager = "org.freedesktop.resolve1.Manager"
	// dbusUnknownObject is resolved's answer for a link it does not know
	// (the interface is gone, and its settings with it).
	resolvedNoSuchLink = "org.freedesktop.resolve1.NoSuchLink"
)

// resolved sets the overlay link's DNS in systemd-resolved over D-Bus:
// the agent's resolver as the link's server, the mesh's domains as the
// link's routing (and search) domains, `~.` and DefaultRoute only when a
// primary nameserver group takes every query. DNSSEC and DNS-over-TLS are
// turned off on the link (the agent's resolver does neither, and a host
// default of "yes" would reject its answers). resolved keeps no state
// across the link's removal, and RevertLink undoes the rest.
type resolved struct {
	iface string
	bus   BusDialer
}

func (r *resolved) mode() Mode { return ModeResolved }

// linkDNS is the (iay) of SetLinkDNS; linkDNSEx the (iayqs) of SetLinkDNSEx.
type linkDNS struct {
	Family  int32
	Address []byte
}

type linkDNSEx struct {
	Family  int32
	Address []byte
	Port    uint16
	Name    string
}

// linkDomain is the (sb) of SetLinkDomains: routing only when true.
type linkDomain struct {
	Domain      string
	RoutingOnly bool
}

func family(a netip.Addr) int32 {
	if a.Is4() {
		return 2 // AF_INET
	}
	return 10 // AF_INET6
}

// resolvedCalls are the Manager calls for c on link idx, in order: the
// values resolved is given, kept apart from the bus so a test checks them.
func resolvedCalls(idx int32, c Config) []call {
	a := c.Server.Addr().Unmap()
	var calls []call
	if c.Server.Port() == 53 {
		calls = append(calls, call{"SetLinkDNS", []any{idx, []linkDNS{{family(a), a.AsSlice()}}}})
	} else {
		// Only SetLinkDNSEx (resolved 246+) carries a port.
		calls = append(calls, call{"SetLinkDNSEx", []any{idx, []linkDNSEx{{family(a), a.AsSlice(), c.Server.Port(), ""}}}})
	}
	doms := []linkDomain{}
	for _, d := range c.Domains {
		if n := trimDot(d.Name); n != "" {
			doms = append(doms, linkDomain{n, d.MatchOnly})
		}
	}
	if c.RouteAll {
		doms = append(doms, linkDomain{".", true})
	}
	calls = append(calls,
		call{"SetLinkDomains", []any{idx, doms}},
		call{"SetLinkDefaultRoute", []any{idx, c.RouteAll}},
		call{"SetLinkDNSSEC", []any{idx, "no"}},
		call{"SetLinkDNSOverTLS", []any{idx, "no"}},
		call{"FlushCaches", nil},
	)
	return calls
}

type call struct {
	Method string
	Args   []any
}

func (r *resolved) index() (int32, error) {
	ifc, err := net.InterfaceByName(r.iface)
	if err != nil {
		return 0, fmt.Errorf("interface %s: %w", r.iface, err)
	}
	return int32(ifc.Index), nil
}

func (r *resolved) apply(ctx context.Context, c Config) error {
	idx, err := r.index()
	if err != nil {
		return err
	}
	conn, err := r.bus(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	obj := conn.Object(resolvedDest, resolvedPath)
	for _, cl := range resolvedCalls(idx, c) {
		err := obj.CallWithContext(ctx, resolvedManager+"."+cl.Method, 0, cl.Args...).Err
		// DNSSEC and DoT are best effort: a resolved built without them
		// refuses the call, and the link works without it.
		if err != nil && (cl.Method == "SetLinkDNSSEC" || cl.Method == "SetLinkDNSOverTLS" || cl.Method == "FlushCaches") {
			continue
		}
		if err != nil {
			return fmt.Errorf("systemd-resolved %s: %w", cl.Method, err)
		}
	}
	return nil
}

func (r *resolved) restore(ctx context.Context) error {
	idx, err := r.index()
	if err != nil {
		return nil // the link is gone, and resolved dropped its settings with it
	}
	conn, err := r.bus(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	err = conn.Object(resolvedDest, resolvedPath).CallWithContext(ctx, resolvedManager+".RevertLink", 0, idx).Err
	var de dbus.Error
	if errors.As(err, &de) && (de.Name == resolvedNoSuchLink || de.Name == "org.freedesktop.DBus.Error.ServiceUnknown" || de.Name == "org.freedesktop.DBus.Error.NameHasNoOwner") {
		return nil // nothing of ours is left in a resolved that is not running
	}
	if err != nil {
		return fmt.Errorf("systemd-resolved RevertLink: %w", err)
	}
	_ = conn.Object(resolvedDest, resolvedPath).CallWithContext(ctx, resolvedManager+".FlushCaches", 0).Err
	return nil
}

// upstreams are the servers resolved uses on its other links and
// globally: where the agent forwards what is not the mesh's when the
// overlay link takes every query.
func (r *resolved) upstreams(ctx context.Context) []netip.AddrPort {
	conn, err := r.bus(ctx)
	if err != nil {
		return nil
	}
	defer conn.Close()
	v, err := conn.Object(resolvedDest, resolvedPath).GetProperty(resolvedManager + ".DNS")
	if err != nil {
		return nil
	}
	var servers []struct {
		Ifindex int32
		Family  int32
		Address []byte
	}
	if err := v.Store(&servers); err != nil {
		return nil
	}
	own, _ := r.index()
	// Never nil: the stub (127.0.0.53) the agent may have read from
	// resolv.conf must not stay its upstream, or "~." loops back.
	out := []netip.AddrPort{}
	for _, s := range servers {
		a, ok := netip.AddrFromSlice(s.Address)
		if !ok || (own != 0 && s.Ifindex == own) {
			continue
		}
		out = append(out, netip.AddrPortFrom(a.Unmap(), 53))
	}
	return out
}

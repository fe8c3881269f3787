package hostdns

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/wiremesh/wiremesh/client/resolvconf"
)

// hostFacts are what detection looks at, gathered apart from the choice so
// the choice is a table-tested function.
type hostFacts struct {
	ResolvConf     []byte // contents of resolv.conf (through a link)
	ResolvConfLink string // its link target, "" for a regular file
	Nsswitch       []byte // contents of nsswitch.conf
	Resolved       bool   // org.freedesktop.resolve1 is on the system bus
	NetworkManager bool   // org.freedesktop.NetworkManager is on the system bus
	HaveResolvConf bool   // the options name a resolv.conf to manage
	HaveHosts      bool   // the options name a hosts file
}

var resolvedStub = netip.AddrFrom4([4]byte{127, 0, 0, 53})

// chooseModes orders the integrations to try, best first, and says why.
// systemd-resolved wins whenever it answers libc's lookups (nss-resolve
// ahead of dns, or its stub in resolv.conf): rewriting resolv.conf would
// then change nothing, or loop through resolved. NetworkManager wins when
// it writes resolv.conf (its header) and is on the bus: a rewrite would be
// undone at its next DHCP renewal. A regular resolv.conf is rewritten; a
// link to another manager's file is left alone, and the hosts file is the
// last resort.
func chooseModes(f hostFacts) ([]Mode, string) {
	var modes []Mode
	var why string
	stub := slices0(resolvconf.Parse(f.ResolvConf).Nameservers, resolvedStub) || strings.Contains(f.ResolvConfLink, "/run/systemd/resolve/")
	nss := nssResolveAhead(f.Nsswitch)
	nmHeader := headerMentions(f.ResolvConf, "NetworkManager")
	switch {
	case f.Resolved && (nss || stub):
		modes = append(modes, ModeResolved)
		why = fmt.Sprintf("systemd-resolved on the bus (nss-resolve=%t, stub in resolv.conf=%t)", nss, stub)
	case nmHeader && f.NetworkManager:
		modes = append(modes, ModeNetworkManager)
		why = "resolv.conf written by NetworkManager, which is on the bus"
	}
	if f.HaveResolvConf && f.ResolvConfLink == "" && !stub && !nmHeader {
		modes = append(modes, ModeResolvConf)
		if why == "" {
			why = "plain resolv.conf"
		}
	}
	if f.HaveHosts {
		modes = append(modes, ModeHosts)
		if why == "" {
			why = "no DNS manager to talk to"
			if f.ResolvConfLink != "" {
				why = "resolv.conf is a link (-> " + f.ResolvConfLink + ") to a manager the agent cannot talk to"
			} else if nmHeader {
				why = "resolv.conf written by NetworkManager, which is not on the bus"
			} else if stub {
				why = "resolv.conf names systemd-resolved's stub, which is not on the bus"
			}
		}
	}
	return modes, why
}

func slices0(as []netip.Addr, a netip.Addr) bool {
	for _, x := range as {
		if x == a {
			return true
		}
	}
	return false
}

// headerMentions reports whether the leading comment lines of a
// resolv.conf name its writer.
func headerMentions(b []byte, writer string) bool {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		t := strings.TrimSpace(sc.Text())
		if t == "" {
			continue
		}
		if t[0] != '#' {
			return false
		}
		if strings.Contains(t, writer) {
			return true
		}
	}
	return false
}

// nssResolveAhead reports whether nsswitch.conf's hosts line asks
// systemd-resolved (resolve) before plain DNS (dns).
func nssResolveAhead(b []byte) bool {
	for _, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "hosts:" {
			continue
		}
		for _, m := range f[1:] {
			switch m {
			case "dns":
				return false
			case "resolve":
				return true
			}
		}
	}
	return false
}

// onBus reports whether name has an owner on the bus.
func onBus(ctx context.Context, dial BusDialer, name string) bool {
	conn, err := dial(ctx)
	if err != nil {
		return false
	}
	defer conn.Close()
	var has bool
	if err := conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, name).Store(&has); err != nil {
		return false
	}
	return has
}

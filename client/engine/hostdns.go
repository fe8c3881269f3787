package engine

import (
	"context"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"time"

	"github.com/wiremesh/wiremesh/client/hostdns"
	"github.com/wiremesh/wiremesh/client/resolver"
)

// hostDNSTimeout bounds one change of the host's resolver (D-Bus calls,
// a file write): it runs under the engine's lock.
const hostDNSTimeout = 5 * time.Second

// hostDNS is the engine's hold on the host's resolver (client/hostdns).
// The DNS service (dns.go) calls point with the resolver's HostConfig
// whenever it changes while management enables DNS, and release when it
// does not or the engine stops. A nil *hostDNS leaves the host alone.
type hostDNS struct {
	h   *hostdns.Host
	log *slog.Logger
	// last is the config applied: a map that changes nothing for the
	// host costs no D-Bus round trip.
	last    hostdns.Config
	applied bool
}

// hostDNSOptions are the options for the host integration of an engine
// on iface; ok is false when the engine must leave the host alone (a zero
// ResolvConf path: tests, --disable-dns).
func hostDNSOptions(o Options, iface string) (hostdns.Options, bool) {
	if o.DisableDNS || o.ResolvConf.Path == "" {
		return hostdns.Options{}, false
	}
	stateDir := o.StateDir
	if stateDir == "" {
		stateDir = filepath.Dir(o.ResolvConf.Backup)
	}
	return hostdns.Options{
		Interface: iface, StateDir: stateDir, ResolvConf: o.ResolvConf,
		HostsPath: hostdns.DefaultHostsPath, Log: o.Log,
	}, true
}

// recoverHostDNS undoes what a crashed run left in the host's resolver,
// whatever this run does with DNS.
func recoverHostDNS(ctx context.Context, o Options) {
	if o.ResolvConf.Path == "" {
		return
	}
	ho, _ := hostDNSOptions(Options{ResolvConf: o.ResolvConf, StateDir: o.StateDir, Log: o.Log}, "")
	ctx, cancel := context.WithTimeout(ctx, hostDNSTimeout)
	defer cancel()
	m, err := hostdns.Recover(ctx, ho)
	if err != nil {
		o.Log.Warn("restore the host's resolver left by an earlier run", "err", err)
	} else if m != hostdns.ModeNone {
		o.Log.Info("restored the host's resolver left by an earlier run", "mode", m)
	}
}

func newHostDNS(ctx context.Context, o Options, iface string) *hostDNS {
	ho, ok := hostDNSOptions(o, iface)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, hostDNSTimeout)
	defer cancel()
	return &hostDNS{h: hostdns.New(ctx, ho), log: o.Log}
}

// hostConfig converts the resolver's HostConfig (and, for the hosts-file
// mode, the zones' address records as the resolver checked them) into
// what the host is told.
func hostConfig(hc resolver.HostConfig, addrs []resolver.HostAddress) hostdns.Config {
	c := hostdns.Config{Server: hc.Server, RouteAll: hc.Primary}
	for _, d := range hc.Domains {
		c.Domains = append(c.Domains, hostdns.Domain{Name: d.Name, MatchOnly: !d.Search})
	}
	for _, a := range addrs {
		c.Hosts = append(c.Hosts, hostdns.HostEntry{Name: a.Name, Addr: a.Addr})
	}
	return c
}

// point makes the host ask the agent's resolver for hc's domains and
// returns the host's own servers to forward the rest to (nil: keep the
// ones the resolver has).
func (h *hostDNS) point(hc resolver.HostConfig, addrs []resolver.HostAddress) ([]netip.AddrPort, error) {
	if h == nil || !hc.Server.IsValid() {
		return nil, nil
	}
	c := hostConfig(hc, addrs)
	if h.applied && h.h.Applied() && configEqual(h.last, c) {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), hostDNSTimeout)
	defer cancel()
	if err := h.h.Apply(ctx, c); err != nil {
		return nil, err
	}
	h.last, h.applied = c, true
	all := h.h.Upstreams(ctx)
	if all == nil {
		return nil, nil
	}
	ups := []netip.AddrPort{}
	for _, u := range all {
		if u.Addr() != hc.Server.Addr() {
			ups = append(ups, u)
		}
	}
	return ups, nil
}

// release gives the host its resolver back.
func (h *hostDNS) release() error {
	if h == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), hostDNSTimeout)
	defer cancel()
	h.applied = false
	return h.h.Restore(ctx)
}

// mode is the "DNS:" of `netbird status -d`: the integration in use, or
// the one detected and why it is not in use.
func (h *hostDNS) mode() string {
	if h == nil {
		return "not managed (peer names resolve at the overlay address only)"
	}
	m := string(h.h.Mode())
	switch {
	case m == "":
		return "none (no way to configure this host's resolver)"
	case !h.h.Applied():
		return m + " (not applied: DNS off in management, or not yet synced)"
	}
	return m
}

// pointHost points the host at the resolver for what it serves now
// (dns.go calls it while management enables DNS, with the config it gave
// the resolver).
func (d *dnsService) pointHost(rc resolver.Config) {
	if d.hdns == nil {
		return
	}
	// The hosts file gets only what the resolver itself serves: the raw
	// map's names may hold newlines, lie outside their zone or be
	// wildcards, and FromProto dropped those.
	ups, err := d.hdns.point(d.res.Config(), resolver.HostAddresses(rc.Zones))
	if err != nil {
		d.log.Error("cannot point the host's resolver at the agent; peer names resolve only at "+d.ip.String(), "err", err)
		return
	}
	d.host = true
	if ups != nil {
		d.res.SetUpstreams(ups)
	}
}

// releaseHost gives the host its resolver back.
func (d *dnsService) releaseHost() {
	if !d.host {
		return
	}
	if err := d.hdns.release(); err != nil {
		d.log.Error("restore the host's resolver", "err", err)
		return
	}
	d.host = false
}

// hostMode is Status.DNSMode.
func (d *dnsService) hostMode() string {
	if d == nil || d.res == nil {
		return "disabled"
	}
	return d.hdns.mode()
}

func configEqual(a, b hostdns.Config) bool {
	return a.Server == b.Server && a.RouteAll == b.RouteAll && slices.Equal(a.Domains, b.Domains) && slices.Equal(a.Hosts, b.Hosts)
}

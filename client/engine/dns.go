package engine

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/wiremesh/wiremesh/client/resolvconf"
	"github.com/wiremesh/wiremesh/client/resolver"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// dnsPort is where the resolver listens on the overlay address: the
// host's resolv.conf cannot name another port.
const dnsPort = 53

// dnsService is the engine's DNS: the resolver on the overlay address and,
// while management enables DNS, the host's resolv.conf pointing at it. Its
// methods run under the engine's lock (or before the engine exists) and
// do nothing on a nil service or one whose resolver could not listen.
type dnsService struct {
	log  *slog.Logger
	res  *resolver.Resolver
	file resolvconf.File
	// host is set while the host's resolv.conf is the agent's.
	host bool
	ip   netip.Addr
	last *mgmtpb.DNSConfig
	fqdn string
	// hdns is the host integration (hostdns.go); nil leaves the host alone.
	hdns *hostDNS
	// overlay is the mesh's network (the resolver answers UDP from it).
	overlay netip.Prefix
	// pinned are the agent's own servers' host names, resolved through the
	// host's original servers whatever the DNS config (pinServers).
	pinned []string
}

// startDNS listens on addr's address; when it cannot (port 53 taken),
// the agent runs without DNS and says why.
func startDNS(addr netip.Prefix, file resolvconf.File, log *slog.Logger) *dnsService {
	ip, overlay := addr.Addr(), addr.Masked()
	res := resolver.New(resolver.Options{Log: log, Overlay: overlay})
	d := &dnsService{log: log, res: res, file: file, ip: ip, overlay: overlay}
	if err := d.res.Listen(netip.AddrPortFrom(ip, dnsPort)); err != nil {
		d.res.Close()
		log.Error("peer names will not resolve", "err", err)
		return nil
	}
	// Until resolv.conf is taken over, forward to what it names now.
	if file.Path != "" {
		if orig, err := file.Original(); err == nil {
			d.res.SetUpstreams(upstreams(resolvconf.Parse(orig), ip))
		}
	}
	return d
}

func upstreams(c resolvconf.Conf, self netip.Addr) []netip.AddrPort {
	var out []netip.AddrPort
	for _, a := range c.Nameservers {
		if a != self {
			out = append(out, netip.AddrPortFrom(a, 53))
		}
	}
	return out
}

// apply follows the map's DNS config: zones and nameserver groups to the
// resolver, and the host pointed at it while the service is enabled
// (given back when not); the search list follows the config.
func (d *dnsService) apply(cfg *mgmtpb.DNSConfig, fqdn string) {
	if d == nil || d.res == nil {
		return
	}
	d.last, d.fqdn = cfg, fqdn
	rc, err := resolver.Local{Self: d.ip, Overlay: d.overlay}.FromProto(cfg)
	if err != nil {
		d.log.Warn("DNS config from management", "err", err)
	}
	if err := d.res.Apply(rc); err != nil && !errors.Is(err, resolver.ErrSkipped) {
		d.log.Error("DNS config from management", "err", err)
	} else if err != nil {
		d.log.Warn("DNS config from management", "err", err)
	}
	if !cfg.GetServiceEnable() {
		d.release()
		return
	}
	d.pointHost(rc) // hostdns.go
}

// release gives the host its resolv.conf back.
func (d *dnsService) release() { d.releaseHost() } // hostdns.go

// moveTo follows a new overlay address.
func (d *dnsService) moveTo(addr netip.Prefix) {
	if d == nil || d.res == nil || (addr.Addr() == d.ip && addr.Masked() == d.overlay) {
		return
	}
	d.release()
	d.res.Close()
	last, fqdn, pinned := d.last, d.fqdn, d.pinned
	nd := startDNS(addr, d.file, d.log)
	if nd == nil {
		d.res = nil // serves nothing and leaves the host alone from now on
		return
	}
	nd.hdns = d.hdns
	*d = *nd
	d.pin(pinned)
	d.apply(last, fqdn)
}

// pinServers keeps the host names of the agent's own servers (the
// management address, and signal, relays, STUN and TURN from cfg)
// resolving through the host's original servers: a custom zone, a match
// domain or a primary group covering them (say, a primary group only
// reachable through the mesh) must not cut the agent off from its
// control plane at its next reconnect. Names only accumulate: a server
// left out of one config may still be dialled.
func (d *dnsService) pinServers(mgmtAddr string, cfg *mgmtpb.NetbirdConfig) {
	if d == nil || d.res == nil {
		return
	}
	names := slices.Clone(d.pinned)
	add := func(n string) {
		n = strings.ToLower(strings.TrimSuffix(n, "."))
		if n == "" || slices.Contains(names, n) {
			return
		}
		if _, err := netip.ParseAddr(strings.Trim(n, "[]")); err == nil {
			return // an address needs no lookup
		}
		names = append(names, n)
	}
	add(serverName(mgmtAddr))
	add(serverName(cfg.GetSignal().GetUri()))
	for _, u := range cfg.GetRelay().GetUrls() {
		add(serverName(u))
	}
	for _, h := range cfg.GetStuns() {
		add(serverName(h.GetUri()))
	}
	for _, t := range cfg.GetTurns() {
		add(serverName(t.GetHostConfig().GetUri()))
	}
	d.pin(names)
}

func (d *dnsService) pin(names []string) {
	d.pinned = names
	d.res.Pin(names)
}

// serverName is the host name in a server address as management and the
// config give them: host:port, scheme://host:port/path, or a STUN/TURN
// URI (stun:host:port?transport=udp).
func serverName(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	} else if i := strings.Index(s, ":"); i >= 0 && !strings.Contains(s[:i], ".") && !strings.HasPrefix(s, "[") {
		// a scheme without slashes (stun:, turn:, turns:), not a host
		if _, err := strconv.Atoi(s[i+1:]); err != nil {
			s = s[i+1:]
		}
	}
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		s = s[i+1:]
	}
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return s
}

// close gives the host its resolv.conf back and stops the resolver.
func (d *dnsService) close() {
	if d == nil || d.res == nil {
		return
	}
	d.release()
	d.res.Close()
}

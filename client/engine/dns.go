package engine

import (
	"log/slog"
	"net/netip"

	"github.com/wiremesh/wiremesh/client/resolvconf"
	"github.com/wiremesh/wiremesh/client/resolver"
	"github.com/wiremesh/wiremesh/internal/dnszone"
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
}

// startDNS listens on ip; when it cannot (port 53 taken), the agent runs
// without DNS and says why.
func startDNS(ip netip.Addr, file resolvconf.File, log *slog.Logger) *dnsService {
	d := &dnsService{log: log, res: resolver.New(log), file: file, ip: ip}
	if err := d.res.Listen(netip.AddrPortFrom(ip, dnsPort)); err != nil {
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

// apply follows the map's DNS config: zones to the resolver, and the host
// pointed at it while the service is enabled (given back when not).
func (d *dnsService) apply(cfg *mgmtpb.DNSConfig, fqdn string) {
	if d == nil || d.res == nil {
		return
	}
	d.last, d.fqdn = cfg, fqdn
	if !cfg.GetServiceEnable() {
		_ = d.res.SetZones(nil)
		d.release()
		return
	}
	if err := d.res.SetZones(cfg.GetCustomZones()); err != nil {
		d.log.Warn("DNS zones from management", "err", err)
	}
	if d.host || d.file.Path == "" {
		return
	}
	var search []string
	for _, z := range cfg.GetCustomZones() {
		if !z.GetSearchDomainDisabled() && z.GetDomain() != "" {
			search = append(search, trimDot(z.GetDomain()))
		}
	}
	if len(search) == 0 {
		if dom := dnszone.Domain(fqdn); dom != "" {
			search = append(search, dom)
		}
	}
	c, err := d.file.Apply(d.ip, search)
	if err != nil {
		d.log.Error("cannot point the host's resolver at the agent; peer names resolve only at "+d.ip.String(), "err", err)
		return
	}
	d.host = true
	d.res.SetUpstreams(upstreams(c, d.ip))
	d.log.Info("host resolver points at the agent", "path", d.file.Path, "nameserver", d.ip, "search", search)
}

func trimDot(s string) string {
	if len(s) > 1 && s[len(s)-1] == '.' {
		return s[:len(s)-1]
	}
	return s
}

// release gives the host its resolv.conf back.
func (d *dnsService) release() {
	if !d.host {
		return
	}
	if _, err := d.file.Restore(); err != nil {
		d.log.Error("restore the host's resolv.conf", "err", err)
		return
	}
	d.host = false
	d.log.Info("host resolver restored", "path", d.file.Path)
}

// moveTo follows a new overlay address.
func (d *dnsService) moveTo(ip netip.Addr) {
	if d == nil || d.res == nil || ip == d.ip {
		return
	}
	d.release()
	d.res.Close()
	last, fqdn := d.last, d.fqdn
	nd := startDNS(ip, d.file, d.log)
	if nd == nil {
		d.res = nil // serves nothing and leaves the host alone from now on
		return
	}
	*d = *nd
	d.apply(last, fqdn)
}

// close gives the host its resolv.conf back and stops the resolver.
func (d *dnsService) close() {
	if d == nil || d.res == nil {
		return
	}
	d.release()
	d.res.Close()
}

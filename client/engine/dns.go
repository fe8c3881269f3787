package engine

import (
	"errors"
	"log/slog"
	"net/netip"

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
}

// startDNS listens on ip; when it cannot (port 53 taken), the agent runs
// without DNS and says why.
func startDNS(ip netip.Addr, file resolvconf.File, log *slog.Logger) *dnsService {
	d := &dnsService{log: log, res: resolver.New(resolver.Options{Log: log}), file: file, ip: ip}
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
	rc, err := resolver.FromProto(cfg)
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
	d.pointHost(cfg) // hostdns.go
}

// release gives the host its resolv.conf back.
func (d *dnsService) release() { d.releaseHost() } // hostdns.go

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
	nd.hdns = d.hdns
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

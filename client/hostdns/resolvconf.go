package hostdns

import (
	"context"
	"net"
	"net/netip"

	"github.com/wiremesh/wiremesh/client/resolvconf"
)

// resolvConfFile rewrites a plain resolv.conf (client/resolvconf): the
// agent's resolver as the only server, the mesh's search domains first.
// The host's servers become the agent's upstreams.
type resolvConfFile struct {
	f    resolvconf.File
	orig []netip.Addr
}

func (r *resolvConfFile) mode() Mode { return ModeResolvConf }

func (r *resolvConfFile) apply(_ context.Context, c Config) error {
	if c.Server.Port() != 53 {
		// resolv.conf cannot name a port.
		return ErrUnavailable
	}
	conf, err := r.f.Apply(c.Server.Addr(), c.searchDomains())
	if err != nil {
		return err
	}
	r.orig = conf.Nameservers
	return nil
}

func (r *resolvConfFile) restore(context.Context) error {
	_, err := r.f.Restore()
	return err
}

func (r *resolvConfFile) upstreams(context.Context) []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(r.orig))
	for _, a := range r.orig {
		out = append(out, netip.AddrPortFrom(a, 53))
	}
	return out
}

func interfaceExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

package acl

import "net/netip"

// Services are TCP ports of this host that every peer of the network map
// may reach whatever the policies say: servers of the agent's own that
// decide themselves who gets in, so that a peer without a policy is told
// why instead of waiting for a timeout (the SSH server, as Tailscale
// SSH does). Only the exact address and port listed open, only to the
// peers' own overlay addresses; inbound drop rules still win. The zero
// value opens nothing.
type Services struct {
	// Ports are the addresses and ports the servers listen on.
	Ports []netip.AddrPort
	// Peers are the map peers' overlay addresses (IPv4 and IPv6).
	Peers []netip.Addr
}

// services is Services as the packet path looks it up.
type services struct {
	ports map[netip.AddrPort]struct{}
	peers map[netip.Addr]struct{}
}

func (s Services) compile() services {
	if len(s.Ports) == 0 || len(s.Peers) == 0 {
		return services{}
	}
	out := services{ports: make(map[netip.AddrPort]struct{}, len(s.Ports)), peers: make(map[netip.Addr]struct{}, len(s.Peers))}
	for _, p := range s.Ports {
		out.ports[netip.AddrPortFrom(p.Addr().Unmap(), p.Port())] = struct{}{}
	}
	for _, a := range s.Peers {
		out.peers[a.Unmap()] = struct{}{}
	}
	return out
}

// admits reports whether p is TCP from a listed peer to a listed port.
func (s services) admits(p packet) bool {
	if len(s.ports) == 0 || p.proto != ProtoTCP || !p.hasPorts {
		return false
	}
	if _, ok := s.ports[netip.AddrPortFrom(p.dst, p.dport)]; !ok {
		return false
	}
	_, ok := s.peers[p.src]
	return ok
}

// SetServices replaces the services open to map peers (see Services).
func (f *Filter) SetServices(s Services) {
	c := s.compile()
	f.mu.Lock()
	f.svc = c
	f.mu.Unlock()
}

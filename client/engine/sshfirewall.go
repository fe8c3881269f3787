package engine

import (
	"net/netip"
	"slices"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// serviceSetter is a firewall that opens ports of this host to every map
// peer (both of ours are). On error it keeps the services it had.
type serviceSetter interface {
	SetServices(s acl.Services) error
}

// openSSHPorts makes the firewall let the map's peers reach the SSH
// server's ports on its overlay address whatever the policies say, while
// the server runs (e.mu held): a peer without a tcp/22 policy is then
// refused by the server, which tells its client why and reports it to
// management, instead of its SYNs being dropped until the client times
// out (as Tailscale SSH does). Only the ports the server holds open: one
// it could not take (the host's sshd on 22) stays closed, or the host's
// own sshd would be reachable without a policy. Pre-authentication, the
// server's caps bound what such a peer can do (sshserver.maxNoPolicy*:
// slots of their own, never those of peers with a policy, and one
// handshake per source per 10 s; the handshake timeout and the Refused
// event limiter).
func (e *Engine) openSSHPorts() {
	f, ok := e.filter.(serviceSetter)
	if !ok {
		return
	}
	s := sshServices(e.ssh.srv != nil, e.ssh.addr, e.ssh.ports, e.ssh.peers)
	// Every map calls this: the nftables firewall would rewrite its
	// table each time, also on agents that never serve SSH.
	if slices.Equal(s.Ports, e.ssh.opened.Ports) && slices.Equal(s.Peers, e.ssh.opened.Peers) {
		return
	}
	// Recorded only once applied: a firewall that refused the change
	// keeps the previous ports (open, after a failed close), and the
	// next map, finding them differ, tries again.
	if err := f.SetServices(s); err != nil {
		e.log.Error("firewall: SSH ports to the map's peers not changed; the previous rules stay, retried at the next network map",
			"ports", s.Ports, "err", err)
		return
	}
	e.ssh.opened = s
}

// sshServices is what the firewall opens for a server listening (on) at
// addr on ports, to the map peers' overlay addresses peers: nothing while
// it is off.
func sshServices(on bool, addr netip.Addr, ports []uint16, peers []netip.Addr) acl.Services {
	if !on || !addr.IsValid() || len(ports) == 0 || len(peers) == 0 {
		return acl.Services{}
	}
	s := acl.Services{Peers: append([]netip.Addr(nil), peers...)}
	for _, p := range ports {
		s.Ports = append(s.Ports, netip.AddrPortFrom(addr, p))
	}
	return s
}

// sshPeerAddrs are the overlay addresses (IPv4 and, when this peer has
// one, IPv6) of map nm's remote peers: their single-address allowed IPs
// inside the overlays, never a network they route.
func sshPeerAddrs(nm *mgmtpb.NetworkMap, self key.Public, overlay, overlay6 netip.Prefix) []netip.Addr {
	var out []netip.Addr
	for _, rp := range nm.GetRemotePeers() {
		if rp.GetWgPubKey() == self.String() {
			continue
		}
		for _, p := range parsePrefixes(rp.GetAllowedIps()) {
			a := p.Addr().Unmap()
			if !p.IsSingleIP() || !(overlay.IsValid() && overlay.Contains(a) || overlay6.IsValid() && overlay6.Contains(a)) {
				continue
			}
			out = append(out, a)
		}
	}
	return out
}

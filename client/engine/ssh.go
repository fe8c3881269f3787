package engine

import (
	"net/netip"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// sshState is the running SSH server, if any, and the address and
// overlay prefix it serves.
type sshState struct {
	srv     *sshserver.Server
	addr    netip.Addr
	overlay netip.Prefix
}

// applySSH follows the map for the SSH server (with e.mu held): it runs
// on the overlay address while this agent allows it (--allow-server-ssh)
// and management enables it (PeerConfig.sshConfig.sshEnabled), as
// NetBird's agent decides, and takes the peers and rules of every map:
// connections the new map no longer allows are closed at once. A server
// to stop is returned, for the caller to Close once e.mu is released
// (Close waits for sessions to end).
func (e *Engine) applySSH(nm *mgmtpb.NetworkMap) (stop *sshserver.Server) {
	enabled := e.ssh.srv != nil
	if pc := nm.GetPeerConfig(); pc != nil {
		enabled = e.o.AllowServerSSH && pc.GetSshConfig().GetSshEnabled()
		if !e.o.AllowServerSSH && pc.GetSshConfig().GetSshEnabled() && e.ssh.srv == nil && !e.ssh.addr.IsValid() {
			e.log.Info("management enables SSH for this peer, but this agent does not allow it (netbird up --allow-server-ssh)")
			e.ssh.addr = netip.IPv4Unspecified() // say it once
		}
	}
	addr, overlay := e.addr.Addr(), e.addr.Masked()
	if e.ssh.srv != nil && (!enabled || e.ssh.addr != addr || e.ssh.overlay != overlay) {
		stop = e.ssh.srv
		e.ssh.srv = nil
		e.log.Info("SSH server stopped")
	}
	if !enabled {
		return stop
	}
	access := sshAccess(nm, e.o.Private.Public(), e.log.Warn)
	if e.ssh.srv != nil {
		e.ssh.srv.SetAccess(access)
		return stop
	}
	hk, err := sshserver.HostKey(e.o.Private)
	if err != nil {
		e.log.Error("SSH server not started", "err", err)
		return stop
	}
	srv := sshserver.New(sshserver.Options{HostKey: hk, Log: e.log.With("component", "ssh"), Overlay: overlay,
		AllowRoot: e.o.AllowSSHRoot, AllowLocalForwarding: e.o.AllowSSHLocalForwarding, AllowRemoteForwarding: e.o.AllowSSHRemoteForwarding})
	srv.SetAccess(access)
	// Port 22 as NetBird's clients expect it; 22022 (NetBird's internal
	// port) too, for hosts whose own sshd holds 22 on every address.
	var listening []uint16
	for _, port := range []uint16{sshserver.Port, sshserver.InternalPort} {
		if err := srv.Listen(addr, port); err != nil {
			e.log.Warn("SSH server: port not available", "port", port, "err", err)
			continue
		}
		listening = append(listening, port)
	}
	if len(listening) == 0 {
		srv.Close() // it serves nothing yet: returns at once
		e.log.Error("SSH server not started: no port available", "address", addr)
		return stop
	}
	e.ssh.srv, e.ssh.addr, e.ssh.overlay = srv, addr, overlay
	e.log.Info("SSH server started", "address", addr, "ports", listening,
		"local_forwarding", e.o.AllowSSHLocalForwarding, "remote_forwarding", e.o.AllowSSHRemoteForwarding)
	return stop
}

// stopSSH ends the SSH server and its sessions.
func (e *Engine) stopSSH() {
	e.mu.Lock()
	srv := e.ssh.srv
	e.ssh.srv = nil
	e.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// sshAccess is what map nm allows the SSH server: the remote peers with
// an SSH key, at their overlay address, and the map's firewall rules read
// as the packet filter reads them.
func sshAccess(nm *mgmtpb.NetworkMap, self key.Public, warn func(string, ...any)) *sshserver.Access {
	a := &sshserver.Access{}
	for _, rp := range nm.GetRemotePeers() {
		if rp.GetWgPubKey() == self.String() {
			continue
		}
		k, err := sshserver.ParsePeerKey(rp.GetSshConfig().GetSshPubKey())
		if err != nil {
			warn("peer's SSH key not understood; it cannot log in", "peer", rp.GetFqdn(), "err", err)
			continue
		}
		ips := parsePrefixes(rp.GetAllowedIps())
		if k == nil || len(ips) == 0 {
			continue
		}
		a.Peers = append(a.Peers, sshserver.Peer{Name: rp.GetFqdn(), IP: ips[0].Addr(), Key: k})
	}
	frs := nm.GetFirewallRules()
	if len(frs) == 0 && !nm.GetFirewallRulesIsEmpty() {
		a.AllowAll = true // an old server's legacy allow-all, as applyFirewall reads it
		return a
	}
	for _, fr := range frs {
		r, ok := firewallRule(fr)
		if !ok {
			continue
		}
		if r.Accept && r.Inbound && r.Proto == acl.ProtoAny && r.PortLo == 0 && !r.Peer.IsValid() {
			a.AllowAll = true
			continue
		}
		a.Rules = append(a.Rules, r)
	}
	return a
}

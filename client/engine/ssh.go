package engine

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net/netip"

	"google.golang.org/protobuf/proto"

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
	jwt     sshJWTState       // NetBird's JWT check (sshjwt.go)
	access  *sshserver.Access // the last map's, for a restart with a new key
	// ports the running server listens on; peers the last map's peers'
	// overlay addresses: the firewall opens the one to the other
	// (sshfirewall.go).
	ports  []uint16
	peers  []netip.Addr
	opened acl.Services // what the firewall was last given
	// on: the last map wants the server (it may still have failed to
	// start, or be between two keys).
	on bool
}

// applySSH follows the map for the SSH server (with e.mu held): it runs
// on the overlay address while this agent allows it (--allow-server-ssh)
// and management enables it (PeerConfig.sshConfig.sshEnabled), as
// NetBird's agent decides, and takes the peers and rules of every map:
// connections the new map no longer allows are closed at once. A server
// to stop is returned, for the caller to Close once e.mu is released
// (Close waits for sessions to end).
func (e *Engine) applySSH(nm *mgmtpb.NetworkMap) (stop *sshserver.Server) {
	enabled := e.ssh.on
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
	e.ssh.on = enabled
	if !enabled {
		e.openSSHPorts()
		return stop
	}
	access := e.sshAccessOf(nm)
	e.ssh.access = access
	e.ssh.peers = sshPeerAddrs(nm, e.o.Private.Public(), overlay, e.addr6.Masked())
	if e.ssh.srv != nil {
		e.ssh.srv.SetAccess(access)
		e.openSSHPorts()
		return stop
	}
	e.startSSH(addr, overlay)
	e.openSSHPorts()
	return stop
}

// sshAccessOf is who map nm lets log in (with e.mu held): its peers by
// key and, unless --disable-ssh-auth, the account's users by token.
func (e *Engine) sshAccessOf(nm *mgmtpb.NetworkMap) *sshserver.Access {
	access := sshAccess(nm, e.o.Private.Public(), e.log.Warn)
	access.Self = e.fqdn
	if !e.o.DisableSSHAuth {
		access.JWT = e.sshJWT(nm)
	}
	return access
}

// startSSH starts the SSH server on addr with the agent's SSH key and the
// last map's access (with e.mu held, no server running).
func (e *Engine) startSSH(addr netip.Addr, overlay netip.Prefix) {
	k, err := sshserver.AgentKey(e.o.Private, e.o.SSHKey)
	if err != nil {
		e.log.Error("SSH server not started", "err", err)
		return
	}
	hk, err := sshserver.Signer(k)
	if err != nil {
		e.log.Error("SSH server not started", "err", err)
		return
	}
	srv := sshserver.New(sshserver.Options{HostKey: hk, Log: e.log.With("component", "ssh"), Overlay: overlay, Audit: e.audit.Record,
		AllowRoot: e.o.AllowSSHRoot, AllowLocalForwarding: e.o.AllowSSHLocalForwarding, AllowRemoteForwarding: e.o.AllowSSHRemoteForwarding,
		SFTPCommand: e.o.SFTPCommand})
	srv.SetAccess(e.ssh.access)
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
		return
	}
	e.ssh.srv, e.ssh.addr, e.ssh.overlay, e.ssh.ports = srv, addr, overlay, listening
	e.log.Info("SSH server started", "address", addr, "ports", listening,
		"local_forwarding", e.o.AllowSSHLocalForwarding, "remote_forwarding", e.o.AllowSSHRemoteForwarding)
}

// RotateSSHKey makes k this peer's SSH key (netbird ssh rotate-key): a
// login of the session's own management client reports it, with this
// session's metadata, posture answers and connection report, then
// SetSSHKey applies it. The session's client reports k from before that
// login on, so no other login of it can put the old key back on
// management once management took k; management refusing k, or not
// answering, sets the client back to the old key and changes nothing
// else.
func (e *Engine) RotateSSHKey(ctx context.Context, k ed25519.PrivateKey) error {
	e.mu.Lock()
	old := e.o.SSHKey
	e.mu.Unlock()
	e.mgmt.SetSSHKey(k)
	conns := e.currentConns()
	// The login carries metadata: built and sent under files.mu, as every
	// metadata report (connreport.go); without the connections it would
	// erase the connection report management keeps.
	e.files.mu.Lock()
	meta := proto.Clone(e.meta).(*mgmtpb.PeerSystemMeta)
	meta.Files = e.files.files
	meta.WiremeshConnections = &mgmtpb.WiremeshConnections{Connections: conns}
	_, err := e.mgmt.Login(ctx, "", meta)
	e.files.mu.Unlock()
	if err != nil {
		e.mgmt.SetSSHKey(old)
		return fmt.Errorf("login with the new SSH key: %w", err)
	}
	e.SetSSHKey(k)
	return nil
}

// SetSSHKey makes k the agent's SSH key from now on (netbird ssh
// rotate-key; nil: the key derived from the WireGuard key), once
// management has it: later logins report it, and a running SSH server
// is restarted with it as its host key. Its sessions end: their clients
// trusted the old key, which the owner just retired.
func (e *Engine) SetSSHKey(k ed25519.PrivateKey) {
	e.mgmt.SetSSHKey(k)
	e.mu.Lock()
	e.o.SSHKey = k
	old := e.ssh.srv
	e.ssh.srv = nil
	e.openSSHPorts() // closed while no server of ours holds them
	e.mu.Unlock()
	if old == nil {
		return // a server started from now on takes the new key
	}
	// The old server holds the ports until closed; a map applied
	// meanwhile starts the new one itself (with the new key).
	old.Close()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped || !e.ssh.on || e.ssh.srv != nil {
		return
	}
	e.startSSH(e.addr.Addr(), e.addr.Masked())
	e.openSSHPorts()
	if e.ssh.srv != nil {
		e.log.Info("SSH server restarted with the new SSH key")
	}
}

// stopSSH ends the SSH server and its sessions.
func (e *Engine) stopSSH() {
	e.mu.Lock()
	srv := e.ssh.srv
	e.ssh.srv, e.ssh.on = nil, false
	e.openSSHPorts()
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
			// It stays, without a key: the firewall lets it reach the
			// ports, and the server must know it is a map peer to tell
			// it when no policy lets it in (and to hold it to the
			// no-policy caps), or to let it log in with a token.
			warn("peer's SSH key not understood; it cannot log in with a key", "peer", rp.GetFqdn(), "err", err)
			k = nil
		}
		ips := parsePrefixes(rp.GetAllowedIps())
		// A peer without a key stays: it may log in with a token.
		if len(ips) == 0 {
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

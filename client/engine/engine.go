// Package engine is the agent's core: it logs in to management, creates the
// WireGuard interface, follows the network map and keeps one peer
// connection per remote peer, fed by signal. It owns every goroutine it
// starts; Stop ends them all and removes the interface.
package engine

import (
	"context"
	"crypto/ed25519"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/stun/v4"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/debugbundle"
	"github.com/wiremesh/wiremesh/client/mgmtclient"
	"github.com/wiremesh/wiremesh/client/peer"
	"github.com/wiremesh/wiremesh/client/relayclient"
	"github.com/wiremesh/wiremesh/client/resolvconf"
	"github.com/wiremesh/wiremesh/client/routes"
	"github.com/wiremesh/wiremesh/client/signalclient"
	"github.com/wiremesh/wiremesh/client/sshaudit"
	"github.com/wiremesh/wiremesh/client/sso"
	"github.com/wiremesh/wiremesh/internal/compactip"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/relaywire"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Options configure an engine.
type Options struct {
	Management mgmtclient.Target
	Private    key.Private
	SetupKey   string
	Hostname   string
	Interface  string
	WGPort     int
	MTU        int
	Version    string
	Log        *slog.Logger
	// ForceRelay disables ICE: peers connect through the relay only
	// (NB_FORCE_RELAY=true, as the official client).
	ForceRelay bool
	// Firewall is where the map's firewall rules are enforced:
	// FirewallUserspace (the default) in wireguard-go's packet path, or
	// FirewallNftables in the kernel on the interface (NB_FIREWALL).
	Firewall string
	// KernelWG asks for kernel WireGuard where the kernel has it
	// (NB_WG_KERNEL=true); without it, or where it is missing, the agent
	// runs wireguard-go. Kernel interfaces are firewalled with nftables.
	KernelWG bool
	// DisableDNS leaves the host's resolver alone and serves no peer
	// names (netbird up --disable-dns).
	DisableDNS bool
	// DisableIPv6 takes no address on the IPv6 overlay: the agent does
	// not announce the IPv6Overlay capability and sets the disableIPv6
	// flag, so management assigns it none and sends others no IPv6
	// address for it (netbird up --disable-ipv6).
	DisableIPv6 bool
	// ResolvConf is the host resolver file the DNS service takes over
	// (with its backup beside the agent's state); a zero Path leaves it
	// alone while still serving peer names on the overlay address.
	ResolvConf resolvconf.File
	// OnFatal is called (once, from a goroutine of the engine) when the
	// engine stops by itself, e.g. because the peer was deleted.
	OnFatal func(error)
	// StateDir is the agent's state directory: a routing peer records
	// there the host settings it changes (forwarding sysctls, its NAT
	// table), so a restart after a crash restores them; the route client
	// records the routes and rules it installs (routes.json) the same
	// way. Empty keeps the record in memory only.
	StateDir string
	// RouteSelection is the user's choice of networks to start with (the
	// daemon persists RouteSelection() and passes it back).
	RouteSelection RouteSelection
	// ExitNodeLAN keeps the host's LAN reachable outside the tunnel while
	// an exit node carries the default route. The daemon's default is
	// true (the official client's); false sends the LAN into the tunnel.
	ExitNodeLAN bool
	// DisableClientRoutes installs none of the map's routes on this
	// machine; they are still listed (netbird networks ls), as the
	// official client lists them (netbird up --disable-client-routes).
	DisableClientRoutes bool
	// DisableServerRoutes serves none of this peer's routes: no
	// forwarding, no masquerade, routed traffic dropped
	// (--disable-server-routes).
	DisableServerRoutes bool
	// BlockLANAccess drops routed traffic to this host's own local
	// networks unless a route it serves names them (--block-lan-access).
	BlockLANAccess bool
	// AllowServerSSH runs the SSH server when management also enables
	// SSH for this peer (netbird up --allow-server-ssh); AllowSSHRoot
	// lets clients log in as root (--enable-ssh-root);
	// AllowSSHLocalForwarding and AllowSSHRemoteForwarding allow ssh -L
	// and -R (--enable-ssh-local-port-forwarding,
	// --enable-ssh-remote-port-forwarding). All off by default.
	AllowServerSSH           bool
	AllowSSHRoot             bool
	AllowSSHLocalForwarding  bool
	AllowSSHRemoteForwarding bool
	// DisableSSHAuth ignores management's jwtConfig (--disable-ssh-auth):
	// the SSH server takes peers' keys only and does not tell NetBird's
	// clients to log in with a token.
	DisableSSHAuth bool
	// SSHKey is the profile's rotated SSH key (netbird ssh rotate-key):
	// the SSH server's host key, reported at login. Nil: the key derived
	// from Private, as for every agent that never rotated.
	SSHKey ed25519.PrivateKey
	// SFTPCommand serves the SSH server's sftp subsystem as the session's
	// user: the agent binary with sshserver.SFTPArg. Empty: OpenSSH's
	// sftp-server where installed (sshserver.Options.SFTPCommand).
	SFTPCommand []string
	// Bundle is what a remote debug bundle (a job from management)
	// collects; nil collects the engine's status only. The engine adds
	// its private and setup keys to the secrets.
	Bundle *debugbundle.Source
}

// Engine is a running agent connection.
type Engine struct {
	o      Options
	log    *slog.Logger
	mgmt   *mgmtclient.Client
	sig    *signalclient.Client
	dev    device
	kernel bool // dev is kernel WireGuard
	mux    *peer.Mux
	relays *relayclient.Manager
	filter ruleSetter
	srv    *serverRoutes // this peer as a routing peer (serverroutes.go)
	ssh    sshState      // this peer's SSH server (ssh.go)
	// audit queues its events for management's activity log (sshaudit.go).
	audit  *sshaudit.Reporter
	meta   *mgmtpb.PeerSystemMeta
	checks chan []string // posture check files asked for (reportChecks)
	files  metaFiles     // their last answer; orders every SyncMeta (connreport.go)
	dns    *dnsService   // nil with DNS disabled or not listening
	synced chan struct{} // closed at the first Sync message
	once   sync.Once     // closes synced

	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	addr netip.Prefix
	// addr6 is the interface's IPv6 overlay address (zero: none; see
	// addr6.go), addr6Err why the one management assigned is not set.
	addr6    netip.Prefix
	addr6Err string
	want6    netip.Prefix // the address_v6 last asked for (addr6 may differ: refused)
	fqdn     string
	// domainPeers is what the resolver needs to send domain route names
	// to routing peers, swapped whole on every map: its callbacks must
	// not take mu (domainroutes.go).
	domainPeers atomic.Pointer[domainPeers]
	// evalReq asks the route loop to apply learned domain addresses now
	// (domainroutes.go).
	evalReq *coalescer
	pending bool // management keeps this peer pending approval
	serial  uint64
	urls    []*stun.URI
	peers   map[key.Public]*remote
	stopped bool
	// The route client (routes.go): keep is the servers' addresses no
	// route may take into the tunnel, keepByHost the last lookup of each.
	routes     *routes.Manager
	resolveNow chan struct{}   // a map brought domain routes: resolve now
	reroute    chan struct{}   // a routing peer left: choose again now
	probeReq   chan key.Public // a peer's GO_IDLE hint: probe it now
	// liveness watches the routing peers in use; gone is those it found
	// not answering (routes.go).
	liveness   *routes.Liveness
	gone       map[key.Public]bool
	keep       []netip.Addr
	keepByHost map[string][]netip.Addr
}

type remote struct {
	conn *peer.Conn
	cfg  *mgmtpb.RemotePeerConfig
	ips  []netip.Prefix
	// routed: the networks this peer carries as the chosen routing peer
	// (routes.go); they follow ips in its allowed IPs.
	routed []netip.Prefix
}

// Meta describes this machine to management, with the capabilities of
// an agent that runs the IPv6 overlay (Options.meta drops that one when
// IPv6 is disabled).
func Meta(hostname, version string) *mgmtpb.PeerSystemMeta {
	if hostname == "" {
		hostname, _ = os.Hostname()
	}
	return &mgmtpb.PeerSystemMeta{
		Hostname: hostname, GoOS: runtime.GOOS, Kernel: kernelName(), KernelVersion: kernelRelease(),
		Platform: runtime.GOARCH, OS: runtime.GOOS, NetbirdVersion: version, NetworkAddresses: interfaceAddresses(),
		Capabilities: capabilities(false),
	}
}

// capabilities are what this agent announces: IPv6Overlay unless IPv6 is
// disabled (management then assigns this peer no IPv6 address).
func capabilities(disableIPv6 bool) []mgmtpb.PeerCapability {
	c := []mgmtpb.PeerCapability{mgmtpb.PeerCapability_PeerCapabilitySourcePrefixes}
	if !disableIPv6 {
		c = append(c, mgmtpb.PeerCapability_PeerCapabilityIPv6Overlay)
	}
	return c
}

// metaFor is the meta of a login outside the engine (registration, SSO,
// key rotation): the capabilities must match the engine's, or the peer
// would hold an IPv6 address between this login and the engine's.
func metaFor(hostname, version string, disableIPv6 bool) *mgmtpb.PeerSystemMeta {
	m := Meta(hostname, version)
	m.Capabilities = capabilities(disableIPv6)
	m.Flags = &mgmtpb.Flags{DisableIPv6: disableIPv6}
	return m
}

// meta is what the engine's login and every Sync send: the machine, the
// local flags and the capabilities these options allow.
func (o Options) meta() *mgmtpb.PeerSystemMeta {
	m := Meta(o.Hostname, o.Version)
	m.Flags = o.localFlags()
	m.Capabilities = capabilities(o.DisableIPv6)
	return m
}

// Login registers the peer if needed and returns the login response,
// without creating anything locally. sshKey is the profile's rotated SSH
// key (nil: the derived one), which the login reports.
func Login(ctx context.Context, t mgmtclient.Target, priv key.Private, sshKey ed25519.PrivateKey, setupKey, hostname, version string, disableIPv6 bool, log *slog.Logger) (*mgmtpb.LoginResponse, error) {
	c, err := mgmtclient.Dial(t, priv, log)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetSSHKey(sshKey)
	return c.Login(ctx, setupKey, metaFor(hostname, version, disableIPv6))
}

// ServerKey asks the management server at t for its key (its identity),
// without logging in.
func ServerKey(ctx context.Context, t mgmtclient.Target, priv key.Private, log *slog.Logger) (key.Public, error) {
	c, err := mgmtclient.Dial(t, priv, log)
	if err != nil {
		return key.Public{}, err
	}
	defer c.Close()
	return c.ServerKey(ctx)
}

// Start logs in, creates the interface and starts following the map.
func Start(ctx context.Context, o Options) (*Engine, error) {
	meta := o.meta()
	mc, err := mgmtclient.Dial(o.Management, o.Private, o.Log)
	if err != nil {
		return nil, err
	}
	mc.SetSSHKey(o.SSHKey)
	lr, err := mc.Login(ctx, o.SetupKey, meta)
	if err != nil {
		mc.Close()
		return nil, err
	}
	addrs, err := mgmtclient.PeerAddresses(lr.GetPeerConfig())
	if err != nil {
		mc.Close()
		return nil, err
	}
	addr := addrs.V4
	mtu := o.MTU
	if mtu == 0 {
		mtu = int(lr.GetPeerConfig().GetMtu())
	}
	if mtu == 0 {
		mtu = 1280
	}
	dev, filter, err := newDataPlane(o, mtu)
	if err != nil {
		mc.Close()
		return nil, err
	}
	if err := dev.SetAddress(addr, mtu); err != nil {
		filter.close()
		dev.Close()
		mc.Close()
		return nil, err
	}
	// A resolv.conf left by a crashed run comes back first, whatever this
	// run does with DNS.
	recoverHostDNS(ctx, o) // hostdns.go
	var dnsSvc *dnsService
	if !o.DisableDNS {
		dnsSvc = startDNS(addr, o.ResolvConf, o.Log)
		if dnsSvc != nil {
			dnsSvc.hdns = newHostDNS(ctx, o, dev.Name())
		}
	}
	sigCfg := lr.GetNetbirdConfig().GetSignal()
	sc, err := signalclient.Dial(sigCfg.GetUri(), sigCfg.GetProtocol() == mgmtpb.HostConfig_HTTPS, o.Private, o.Log)
	if err != nil {
		dnsSvc.close()
		filter.close()
		dev.Close()
		mc.Close()
		return nil, err
	}
	e := &Engine{
		o: o, log: o.Log, mgmt: mc, sig: sc, dev: dev, meta: meta, filter: filter, kernel: isKernel(dev),
		relays:  relayclient.NewManager(o.Private.Public().String(), nil, o.Log),
		mux:     peer.NewMux(dev.Bind().STUNConn(), netip.PrefixFrom(addr.Masked().Addr(), addr.Bits())),
		addr:    addr,
		fqdn:    lr.GetPeerConfig().GetFqdn(),
		pending: lr.GetPeerConfig().GetWiremeshPendingApproval(),
		peers:   map[key.Public]*remote{},
		checks:  make(chan []string, 1),
		audit:   sshaudit.New(sshaudit.Options{Send: mc.SSHEvents, Log: o.Log.With("component", "ssh-audit")}),
		dns:     dnsSvc,
		synced:  make(chan struct{}),
	}
	dev.Bind().SetProbeHandler(e.onProbe)
	e.srv = newServerRoutes(o, dev.Name(), filter)
	e.setAddress6(addrs.V6) // addr6.go
	e.startRoutes(dev.Name())
	// The login response's config starts the relay now, so the relayed
	// path is ready about when the first network map arrives.
	if cfg := lr.GetNetbirdConfig(); cfg != nil {
		e.applyConfig(cfg)
	}
	// The servers' addresses are known before the first map brings routes.
	e.refreshKeep(ctx)
	rctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.wg.Add(4)
	go func() { defer e.wg.Done(); sc.Run(rctx, e.onSignal) }()
	go func() { defer e.wg.Done(); e.reportChecks(rctx) }()
	e.wg.Add(1)
	go func() { defer e.wg.Done(); e.reportConns(rctx) }()
	e.wg.Add(1)
	go func() { defer e.wg.Done(); e.reportSSH(rctx) }()
	go func() { defer e.wg.Done(); e.runJobs(rctx) }()
	e.wg.Add(2)
	go func() { defer e.wg.Done(); e.runRoutes(rctx) }()
	go func() { defer e.wg.Done(); e.runReask(rctx) }()
	go func() {
		defer e.wg.Done()
		err := mc.Sync(rctx, meta, e.onSync)
		if err != nil && rctx.Err() == nil {
			e.log.Error("management stopped accepting this peer", "err", err)
			if o.OnFatal != nil {
				go o.OnFatal(err)
			}
		}
	}()
	e.log.Info("interface up", "interface", dev.Name(), "address", addr, "wg_port", dev.Port(), "kernel", e.kernel)
	return e, nil
}

// Stop ends every connection and removes the interface.
func (e *Engine) Stop() {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	e.stopped = true
	peers := e.peers
	e.peers = map[key.Public]*remote{}
	e.mu.Unlock()
	// Before signal closes: connected peers learn at once that we are
	// gone (a peer routing through us moves to another routing peer now,
	// not after its timeouts).
	e.sayGoodbye(peers)
	e.cancel()
	e.wg.Wait()
	e.stopRoutes()
	e.stopSSH()
	for _, r := range peers {
		r.conn.Close()
	}
	e.relays.Close()
	e.dns.close()
	_ = e.mux.Close()
	e.dev.Close()
	e.srv.close()
	e.filter.close()
	e.sig.Close()
	e.mgmt.Close()
}

// Logout deletes this peer on the management server.
func (e *Engine) Logout(ctx context.Context) error { return e.mgmt.Logout(ctx) }

func (e *Engine) onSignal(m signalclient.Message) {
	e.mu.Lock()
	r := e.peers[m.From]
	e.mu.Unlock()
	if r == nil {
		return // not in our map: the spec says drop
	}
	r.conn.Signal(m.Body)
}

func (e *Engine) onProbe(from netip.AddrPort, body []byte) {
	sender, ok := peer.ProbeSender(body)
	if !ok {
		return
	}
	e.mu.Lock()
	r := e.peers[sender]
	e.mu.Unlock()
	if r != nil {
		r.conn.Probe(from, body)
	}
}

func (e *Engine) currentURLs() []*stun.URI {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*stun.URI(nil), e.urls...)
}

func (e *Engine) onSync(r *mgmtpb.SyncResponse) {
	e.once.Do(func() { close(e.synced) })
	if cfg := r.GetNetbirdConfig(); cfg != nil {
		e.applyConfig(cfg)
	}
	e.wantChecks(r)
	nm := r.GetNetworkMap()
	if nm == nil {
		return
	}
	removed := map[key.Public]*peer.Conn{}
	defer func() {
		// Closing waits for the peer's loop, which may need e.mu: never
		// hold the lock while doing it. The WireGuard peer goes after its
		// loop, so that the loop cannot re-add it.
		for k, c := range removed {
			c.Close()
			_ = e.dev.RemovePeer(k)
		}
	}()
	var sshStop interface{ Close() } // closed after e.mu is released
	defer func() {
		if sshStop != nil {
			sshStop.Close()
		}
	}()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped || nm.GetSerial() < e.serial {
		return
	}
	if pc := nm.GetPeerConfig(); pc != nil && pc.GetAddress() != e.addr.String() {
		if p, err := netip.ParsePrefix(pc.GetAddress()); err == nil {
			if err := e.dev.SetAddress(p, 0); err != nil {
				e.log.Error("change address", "err", err)
			} else {
				e.addr = p
				e.dns.moveTo(p)
			}
		}
	}
	if pc := nm.GetPeerConfig(); pc != nil {
		if a, err := mgmtclient.PeerAddresses(pc); err != nil {
			e.log.Error("network map: peer address not applied", "err", err)
		} else {
			e.syncAddress6(a.V6)
		}
	}
	if pc := nm.GetPeerConfig(); pc != nil && pc.GetFqdn() != "" {
		e.fqdn = pc.GetFqdn()
	}
	if pc := nm.GetPeerConfig(); pc != nil && pc.GetWiremeshPendingApproval() != e.pending {
		e.pending = pc.GetWiremeshPendingApproval()
		if e.pending {
			e.log.Warn("this peer is pending approval: an administrator of the account must approve it before it can reach other peers")
		} else {
			e.log.Info("this peer was approved")
		}
	}
	e.serial = nm.GetSerial()
	// Server routes first: the peer firewall opens the DNS forwarder's
	// port only once it listens.
	e.srv.apply(e.o.Private.Public(), e.addr, nm)
	e.applyFirewall(nm)
	e.dns.apply(nm.GetDNSConfig(), e.fqdn)
	want := map[key.Public]*mgmtpb.RemotePeerConfig{}
	if !nm.GetRemotePeersIsEmpty() {
		for _, rp := range nm.GetRemotePeers() {
			k, err := key.ParsePublic(rp.GetWgPubKey())
			if err != nil || k == e.o.Private.Public() {
				continue
			}
			want[k] = rp
		}
	}
	for k, r := range e.peers {
		if _, ok := want[k]; !ok {
			e.log.Info("peer removed", "peer", k.String())
			removed[k] = r.conn
			delete(e.peers, k)
		}
	}
	for k, rp := range want {
		ips := parsePrefixes(rp.GetAllowedIps())
		if len(ips) == 0 {
			continue
		}
		if r := e.peers[k]; r != nil {
			if !samePrefixes(r.ips, ips) {
				r.ips = ips
				r.conn.SetAllowedIPs(r.allowed())
			}
			r.cfg = rp
			continue
		}
		e.log.Info("peer added", "peer", k.String(), "fqdn", rp.GetFqdn(), "allowed_ips", rp.GetAllowedIps())
		conn := peer.New(peer.Config{
			Local: e.o.Private, Remote: k, AllowedIPs: ips, Overlay: netip.PrefixFrom(e.addr.Masked().Addr(), e.addr.Bits()),
			Mux: e.mux, URLs: e.currentURLs, WGPort: e.dev.Port(), Version: e.o.Version, Log: e.log,
			Relay: e.relays, ForceRelay: e.o.ForceRelay, OnLeft: e.routeNow, OnIdleHint: func() { e.probeNow(k) },
		}, e.sig, e.dev)
		e.peers[k] = &remote{conn: conn, cfg: rp, ips: ips}
	}
	// After the peers: a route's routing peer must be known to be chosen.
	e.applyRoutes(nm)
	if old := e.applySSH(nm); old != nil {
		sshStop = old
	}
}

func (e *Engine) applyConfig(cfg *mgmtpb.NetbirdConfig) {
	var stuns, turns []*stun.URI
	for _, h := range cfg.GetStuns() {
		if u, err := stun.ParseURI(h.GetUri()); err == nil {
			stuns = append(stuns, u)
		}
	}
	for _, t := range cfg.GetTurns() {
		if u, err := stun.ParseURI(t.GetHostConfig().GetUri()); err == nil {
			u.Username, u.Password = t.GetUser(), t.GetPassword()
			turns = append(turns, u)
		}
	}
	// A config without relay clears the relays (the spec's rule).
	var relayURLs []string
	var cred relaywire.Credentials
	if rc := cfg.GetRelay(); rc != nil {
		relayURLs = rc.GetUrls()
		cred = relaywire.Credentials{Payload: rc.GetTokenPayload(), Signature: rc.GetTokenSignature()}
	}
	e.relays.Update(relayURLs, cred)
	e.mu.Lock()
	defer e.mu.Unlock()
	// Empty lists mean "no change", as in the reference client.
	var keep []*stun.URI
	for _, u := range e.urls {
		isTURN := u.Scheme == stun.SchemeTypeTURN || u.Scheme == stun.SchemeTypeTURNS
		if (isTURN && len(turns) == 0) || (!isTURN && len(stuns) == 0) {
			keep = append(keep, u)
		}
	}
	e.urls = append(append(keep, stuns...), turns...)
	e.dns.pinServers(e.o.Management.Addr, cfg)
}

// parsePrefixes reads a remote peer's allowed IPs: its IPv4 address
// and, on the IPv6 overlay, its IPv6 /128 (management sends that one only
// to peers on the IPv6 overlay).
func parsePrefixes(ss []string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		if p, err := netip.ParsePrefix(s); err == nil && !p.Addr().Is4In6() && p.Addr().Zone() == "" {
			out = append(out, p)
		}
	}
	return out
}

func samePrefixes(a, b []netip.Prefix) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// PeerStatus is one remote peer in a status report.
type PeerStatus struct {
	Key  key.Public
	FQDN string
	IP   string
	// IPv6 is the peer's IPv6 overlay address ("" when it has none or
	// this peer is not on the IPv6 overlay).
	IPv6          string
	Conn          peer.Status
	LastHandshake time.Time
	RxBytes       int64
	TxBytes       int64
	// SSHHostKey is the peer's SSH key from the map (authorized_keys
	// form), what `netbird ssh` accepts as its host key.
	SSHHostKey []byte
}

// Status is a snapshot of the engine.
type Status struct {
	Address netip.Prefix
	// Address6 is the IPv6 overlay address (zero: none), IPv6Mode
	// whether this peer is on the IPv6 overlay and why not (addr6.go).
	Address6      netip.Prefix
	IPv6Mode      string
	FQDN          string
	Interface     string
	WGPort        int
	PublicKey     key.Public
	Management    string
	ServerVersion string
	MgmtConnected bool
	MgmtError     string
	// PendingApproval: management keeps this peer out of every map until
	// an admin approves it.
	PendingApproval bool
	Signal          string
	SignalConn      bool
	SignalError     string
	Peers           []PeerStatus
	Relays          []relayclient.State
	KernelWG        bool
	// Served are the networks this peer routes for others (its server
	// routes), for `netbird status`.
	Served []netip.Prefix
	// DNSMode is how the host's resolver is integrated ("systemd-resolved",
	// "NetworkManager", "resolv.conf", "hosts file"...), for `netbird
	// status -d`.
	DNSMode string
}

// Status reports the current state.
func (e *Engine) Status() Status {
	stats, _ := e.dev.PeerStats()
	e.mu.Lock()
	defer e.mu.Unlock()
	st := Status{
		Address: e.addr, Address6: e.addr6, IPv6Mode: e.ipv6Mode(), FQDN: e.fqdn, Interface: e.dev.Name(), WGPort: e.dev.Port(), PublicKey: e.o.Private.Public(),
		Management: e.mgmt.URL(), ServerVersion: e.mgmt.ServerVersion(), MgmtConnected: e.mgmt.Connected(), MgmtError: e.mgmt.LastError(),
		Signal: e.sig.Addr, SignalConn: e.sig.Connected(), SignalError: e.sig.LastError(),
		Relays: e.relays.States(), KernelWG: e.kernel, PendingApproval: e.pending,
	}
	st.DNSMode = e.dns.hostMode() // hostdns.go
	if e.srv != nil {
		st.Served = e.srv.served()
	}
	for k, r := range e.peers {
		ps := PeerStatus{Key: k, FQDN: r.cfg.GetFqdn(), Conn: r.conn.Status(), SSHHostKey: r.cfg.GetSshConfig().GetSshPubKey()}
		ps.IP, ps.IPv6 = peerIPs(r.ips)
		if s, ok := stats[k]; ok {
			ps.LastHandshake, ps.RxBytes, ps.TxBytes = s.LastHandshake, s.RxBytes, s.TxBytes
		}
		st.Peers = append(st.Peers, ps)
	}
	sort.Slice(st.Peers, func(i, j int) bool { return st.Peers[i].IP < st.Peers[j].IP })
	return st
}

// ErrNeedsLogin reports that the peer must be registered with a setup key.
var ErrNeedsLogin = mgmtclient.ErrNeedsLogin

// IsPermanent reports whether err means retrying cannot help.
func IsPermanent(err error) bool {
	return errors.Is(err, mgmtclient.ErrNeedsLogin) || errors.Is(err, mgmtclient.ErrBadSetupKey) || errors.Is(err, mgmtclient.ErrPermanentSync)
}

// applyFirewall installs the map's peer firewall rules. An empty list not
// marked empty comes from an old server and means allow all (the spec's
// legacy rule); marked empty, nothing may connect in.
func (e *Engine) applyFirewall(nm *mgmtpb.NetworkMap) {
	frs := nm.GetFirewallRules()
	if len(frs) == 0 && !nm.GetFirewallRulesIsEmpty() {
		e.filter.SetRules(nil, true)
		return
	}
	var rules []acl.Rule
	allowAll := false
	for _, fr := range frs {
		r, ok := firewallRule(fr)
		if !ok {
			e.log.Warn("firewall rule not understood, skipped", "rule", fr.String())
			continue
		}
		if r.Accept && r.Inbound && r.Proto == acl.ProtoAny && r.PortLo == 0 && !r.Peer.IsValid() {
			allowAll = true
			continue
		}
		rules = append(rules, r)
	}
	rules = append(rules, dnsForwarderRules(e.srv)...)
	e.filter.SetRules(rules, allowAll)
}

func firewallRule(fr *mgmtpb.FirewallRule) (acl.Rule, bool) {
	r := acl.Rule{Inbound: fr.GetDirection() == mgmtpb.RuleDirection_IN, Accept: fr.GetAction() == mgmtpb.RuleAction_ACCEPT}
	switch fr.GetProtocol() {
	case mgmtpb.RuleProtocol_ALL:
		r.Proto = acl.ProtoAny
	case mgmtpb.RuleProtocol_TCP:
		r.Proto = acl.ProtoTCP
	case mgmtpb.RuleProtocol_UDP:
		r.Proto = acl.ProtoUDP
	case mgmtpb.RuleProtocol_ICMP:
		r.Proto = acl.ProtoICMP
	default:
		return r, false
	}
	// The source prefix, when given, wins over the legacy PeerIP: 5
	// bytes for an IPv4 peer, 17 for a peer's IPv6 twin of a rule.
	if sp := fr.GetSourcePrefixes(); len(sp) > 0 && (len(sp[0]) == 5 || len(sp[0]) == 17) {
		p, err := compactip.Parse(sp[0])
		switch {
		case err != nil:
			return r, false
		case p.IsSingleIP():
			r.Peer = p.Addr().Unmap() // a v4-mapped /128 is the IPv4 peer, for both filters
		case p.Bits() != 0:
			return r, false // a network prefix: not produced for peers
		}
	} else if ip, err := netip.ParseAddr(fr.GetPeerIP()); err == nil && !ip.IsUnspecified() {
		r.Peer = ip.Unmap()
	}
	switch pi := fr.GetPortInfo().GetPortSelection().(type) {
	case *mgmtpb.PortInfo_Port:
		r.PortLo, r.PortHi = uint16(pi.Port), uint16(pi.Port)
	case *mgmtpb.PortInfo_Range_:
		r.PortLo, r.PortHi = uint16(pi.Range.GetStart()), uint16(pi.Range.GetEnd())
	default:
		if p, err := strconv.Atoi(fr.GetPort()); err == nil && p > 0 && p < 65536 {
			r.PortLo, r.PortHi = uint16(p), uint16(p)
		}
	}
	return r, true
}

// StartSSO asks the server how users log in and starts that login: the
// PKCE flow with a loopback callback when a browser can open on this
// machine, else (or when PKCE is not offered or its callback ports are
// taken) the device flow.
func StartSSO(ctx context.Context, t mgmtclient.Target, priv key.Private, browser bool, log *slog.Logger) (sso.Flow, error) {
	c, err := mgmtclient.Dial(t, priv, log)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	pkce, device, err := c.Flows(ctx)
	if err != nil {
		return nil, err
	}
	if pkce == nil && device == nil {
		return nil, errors.New("this management server offers no SSO login: use a setup key (netbird up --setup-key KEY)")
	}
	if browser && pkce != nil {
		f, err := sso.StartPKCE(ctx, pkce)
		if err == nil || device == nil {
			return f, err
		}
		log.Warn("browser login unavailable, using the device login", "err", err)
	}
	if device == nil {
		return nil, errors.New("this management server offers only the browser login; run netbird up where a browser can open")
	}
	return sso.StartDevice(ctx, device)
}

// LoginJWT logs in (registering if needed) with a token from the
// identity provider, reporting sshKey as Login does.
func LoginJWT(ctx context.Context, t mgmtclient.Target, priv key.Private, sshKey ed25519.PrivateKey, jwt, hostname, version string, disableIPv6 bool, log *slog.Logger) (*mgmtpb.LoginResponse, error) {
	c, err := mgmtclient.Dial(t, priv, log)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetSSHKey(sshKey)
	return c.LoginJWT(ctx, jwt, metaFor(hostname, version, disableIPv6))
}

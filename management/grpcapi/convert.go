package grpcapi

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/compactip"
	"github.com/wiremesh/wiremesh/internal/dnszone"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// maxField bounds every self-reported string we keep, so a hostile client
// cannot bloat the store.
const maxField = 256

func clip(s string) string {
	if len(s) <= maxField {
		return s
	}
	s = s[:maxField]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// metaFrom converts what a peer reports, with the address it reached us
// from (posture network-range checks read it).
func metaFrom(ctx context.Context, m *mgmtpb.PeerSystemMeta) account.Meta {
	out := metaFromProto(m)
	if ip := sourceAddr(ctx); ip.IsValid() {
		out.ConnectionIP = ip.String()
	}
	return out
}

func metaFromProto(m *mgmtpb.PeerSystemMeta) account.Meta {
	out := account.Meta{
		Hostname:       clip(m.GetHostname()),
		GoOS:           clip(m.GetGoOS()),
		Kernel:         clip(m.GetKernel()),
		KernelVersion:  clip(m.GetKernelVersion()),
		Core:           clip(m.GetCore()),
		Platform:       clip(m.GetPlatform()),
		OS:             clip(m.GetOS()),
		OSVersion:      clip(m.GetOSVersion()),
		NetbirdVersion: clip(m.GetNetbirdVersion()),
		UIVersion:      clip(m.GetUiVersion()),
		SerialNumber:   clip(m.GetSysSerialNumber()),
		ProductName:    clip(m.GetSysProductName()),
		Manufacturer:   clip(m.GetSysManufacturer()),
	}
	if f := m.GetFlags(); f != nil {
		out.Flags = account.LocalFlags{
			RosenpassEnabled: f.GetRosenpassEnabled(), RosenpassPermissive: f.GetRosenpassPermissive(),
			ServerSSHAllowed: f.GetServerSSHAllowed(), DisableClientRoutes: f.GetDisableClientRoutes(),
			DisableServerRoutes: f.GetDisableServerRoutes(), DisableDNS: f.GetDisableDNS(), DisableFirewall: f.GetDisableFirewall(),
			BlockLANAccess: f.GetBlockLANAccess(), BlockInbound: f.GetBlockInbound(), LazyConnectionEnabled: f.GetLazyConnectionEnabled(),
			DisableIPv6: f.GetDisableIPv6(),
		}
	}
	// Capabilities are a set: an agent that lists one twice, or values
	// this server does not know, still means what it says about IPv6.
	out.IPv6Overlay = slices.Contains(m.GetCapabilities(), mgmtpb.PeerCapability_PeerCapabilityIPv6Overlay)
	for i, a := range m.GetNetworkAddresses() {
		if i == 32 {
			break
		}
		out.Addresses = append(out.Addresses, clip(a.GetNetIP()))
	}
	for i, f := range m.GetFiles() {
		if i == 32 {
			break
		}
		out.Files = append(out.Files, account.FileState{Path: clip(f.GetPath()), Exist: f.GetExist(), ProcessIsRunning: f.GetProcessIsRunning()})
	}
	return out
}

// legacyClient reports whether a client predates NetworkMap-only syncs
// (about 0.29.3) and so reads the deprecated top-level SyncResponse fields.
func legacyClient(version string) bool {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 3 {
		return false // development builds and unknown versions are current
	}
	n := make([]int, 3)
	for i, p := range parts {
		p, _, _ = strings.Cut(p, "-")
		p, _, _ = strings.Cut(p, "+") // ours: 0.77.1+wiremesh.0.2.0
		v, err := strconv.Atoi(p)
		if err != nil {
			return false
		}
		n[i] = v
	}
	return n[0] == 0 && (n[1] < 29 || n[1] == 29 && n[2] < 3)
}

// allowAllRules is the explicit allow-all the spec recommends: ALL IN and
// ALL OUT for any peer, with a 0.0.0.0/0 source prefix for clients that
// read sourcePrefixes; with v6 (a v6-active receiver) also their twins
// for any v6 peer, PeerIP "::" and source ::/0, as NetBird sends them.
func allowAllRules(v6 bool) []*mgmtpb.FirewallRule {
	out := make([]*mgmtpb.FirewallRule, 0, 4)
	anys := []netip.Prefix{netip.PrefixFrom(netip.IPv4Unspecified(), 0)}
	if v6 {
		anys = append(anys, netip.PrefixFrom(netip.IPv6Unspecified(), 0))
	}
	for _, a := range anys {
		for _, dir := range []mgmtpb.RuleDirection{mgmtpb.RuleDirection_IN, mgmtpb.RuleDirection_OUT} {
			out = append(out, &mgmtpb.FirewallRule{PeerIP: a.Addr().String(), Direction: dir, Action: mgmtpb.RuleAction_ACCEPT,
				Protocol: mgmtpb.RuleProtocol_ALL, SourcePrefixes: [][]byte{compactip.Prefix(a)}})
		}
	}
	return out
}

func peerConfig(m networkmap.Map) *mgmtpb.PeerConfig {
	pc := &mgmtpb.PeerConfig{
		Address: m.Address(),
		// sshEnabled is the admin's switch (REST ssh_enabled); the agent
		// also needs its own --allow-server-ssh, as NetBird's does. We
		// send no jwtConfig: our servers authorize by the peers' keys.
		SshConfig: &mgmtpb.SSHConfig{SshEnabled: m.Self.SSHEnabled},
		Fqdn:      m.Self.FQDN(m.Domain),
		// As the reference passes them: the client reads both from here.
		LazyConnectionEnabled:           m.Flags.LazyConnection,
		RoutingPeerDnsResolutionEnabled: m.Flags.RoutingPeerDNS,
		// Our agents show it; official clients ignore the field and just
		// get a map without peers, as from the reference server.
		WiremeshPendingApproval: m.Self.ApprovalRequired,
	}
	// The client restarts its engine when this differs from what it
	// configured at Login: Login and every map decide it by the same rule
	// (networkmap.V6Active) and encode it here.
	if p, ok := m.AddressV6(); ok {
		pc.AddressV6 = compactip.Prefix(p)
	}
	return pc
}

// remoteCache holds how each peer is shown to others for one account
// state: every map that lists a peer shares the same messages, built once
// per change instead of once per map (messages are never modified after).
type remoteCache map[account.PeerID]shown

// shown is a peer as other peers' maps show it, as messages and, for
// whole maps, already marshaled (the bulk of every map is copied, not
// encoded again per stream). A v6-active peer is shown two ways: with
// its v6 address (rp6, and the AAAA record rec6) to v6-active receivers,
// without to the others.
type shown struct {
	rp      *mgmtpb.RemotePeerConfig
	rec     *mgmtpb.SimpleRecord // its DNS record; nil when it has none
	rpWire  []byte
	recWire []byte
	// rp6 is rp with the /128 (rp itself for a peer that is not
	// v6-active); rec6 its AAAA record (nil: none).
	rp6      *mgmtpb.RemotePeerConfig
	rec6     *mgmtpb.SimpleRecord
	rp6Wire  []byte
	rec6Wire []byte
}

// newShown builds how p is shown; v6 is whether p is v6-active.
func newShown(p *account.Peer, domain string, v6 bool) shown {
	host := dnszone.Host{FQDN: p.FQDN(domain), IP: p.IP}
	sh := shown{rp: remotePeer(p, domain, false), rec: dnszone.Record(domain, host)}
	sh.rpWire, _ = proto.MarshalOptions{Deterministic: true}.Marshal(sh.rp)
	if sh.rec != nil {
		sh.recWire, _ = proto.MarshalOptions{Deterministic: true}.Marshal(sh.rec)
	}
	sh.rp6, sh.rp6Wire = sh.rp, sh.rpWire
	if v6 {
		host.IPv6 = p.IPv6
		sh.rp6, sh.rec6 = remotePeer(p, domain, true), dnszone.RecordAAAA(domain, host)
		sh.rp6Wire, _ = proto.MarshalOptions{Deterministic: true}.Marshal(sh.rp6)
		if sh.rec6 != nil {
			sh.rec6Wire, _ = proto.MarshalOptions{Deterministic: true}.Marshal(sh.rec6)
		}
	}
	return sh
}

// peer is rp or rp6 (v6: the receiver shows the peer's v6 address).
func (sh *shown) peer(v6 bool) (*mgmtpb.RemotePeerConfig, []byte) {
	if v6 {
		return sh.rp6, sh.rp6Wire
	}
	return sh.rp, sh.rpWire
}

// remotePeer is p as a RemotePeerConfig; with v6 its allowed IPs also
// hold its /128 (after the /32, as NetBird lists them).
func remotePeer(p *account.Peer, domain string, v6 bool) *mgmtpb.RemotePeerConfig {
	rp := &mgmtpb.RemotePeerConfig{
		WgPubKey:   p.Key.String(),
		AllowedIps: []string{netip.PrefixFrom(p.IP, 32).String()},
		SshConfig:  &mgmtpb.SSHConfig{SshPubKey: []byte(p.SSHPubKey)},
		Fqdn:       p.FQDN(domain),
	}
	if v6 {
		rp.AllowedIps = append(rp.AllowedIps, netip.PrefixFrom(p.IPv6, 128).String())
	}
	return rp
}

// bulk is most of a whole map, already marshaled: its remote peers and its
// peer zone's DNS records, in the order the map lists them (encodeMap
// copies them instead of encoding them again for every stream).
type bulk struct {
	peers   [][]byte
	records [][]byte
}

func remotePeers(m networkmap.Map, cache remoteCache, b *bulk) []*mgmtpb.RemotePeerConfig {
	out := make([]*mgmtpb.RemotePeerConfig, 0, len(m.Peers))
	b.peers = make([][]byte, 0, len(m.Peers))
	for _, p := range m.Peers {
		v6 := m.ShowsV6(p)
		sh, ok := cache[p.ID]
		if !ok {
			sh = newShown(p, m.Domain, v6)
		}
		rp, wire := sh.peer(v6)
		out = append(out, rp)
		b.peers = append(b.peers, wire)
	}
	return out
}

// respFor is what the receiving client understands beyond the spec's
// current map.
type respFor struct {
	legacy bool // also the top-level peerConfig and remotePeers of old clients
	// derivedDNS: the client builds the peer zone's records itself
	// (WiremeshCapabilities.derivedPeerDNS), so the map carries none.
	derivedDNS bool
}

func networkMapProto(m networkmap.Map, cache remoteCache, to respFor) (*mgmtpb.NetworkMap, *bulk) {
	b := &bulk{}
	rp := remotePeers(m, cache, b)
	nm := &mgmtpb.NetworkMap{
		Serial:              m.Serial,
		PeerConfig:          peerConfig(m),
		RemotePeers:         rp,
		RemotePeersIsEmpty:  len(rp) == 0,
		DNSConfig:           dnsConfig(m, cache, b, to.derivedDNS),
		Routes:              routes(m.Routes),
		RoutesFirewallRules: routeRules(m.RouteRules),
	}
	// As for FirewallRules: without the flag an empty list reads as an old
	// server's, and the official client would allow all routed traffic.
	nm.RoutesFirewallRulesIsEmpty = len(nm.RoutesFirewallRules) == 0
	if m.AllowAll {
		nm.FirewallRules = allowAllRules(m.SelfV6)
	}
	nm.FirewallRules = append(nm.FirewallRules, firewallRules(m.Rules)...)
	// An empty list must say so: without the flag the official client
	// assumes an old server and allows everything.
	nm.FirewallRulesIsEmpty = len(nm.FirewallRules) == 0
	return nm, b
}

// dnsConfig turns on the peer's DNS service with the zone of the peers it
// may reach (and itself), as the reference server does: names of peers
// hidden by policy do not resolve. With derived, the zone says that the
// client fills in the records (one per peer, by the rule of
// internal/dnszone), so a whole map carries each peer once, not twice.
// The account's custom zones follow the peer zone, and its nameserver
// groups come along; a peer whose DNS is unmanaged gets ServiceEnable off
// and nothing else, as from the reference server.
func dnsConfig(m networkmap.Map, cache remoteCache, b *bulk, derived bool) *mgmtpb.DNSConfig {
	// The forwarder port goes to every peer, managed DNS or not, as
	// NetBird's server sends it: clients need it to reach routing peers.
	fwd := int64(m.ForwarderPort)
	if !m.DNS.Managed {
		return &mgmtpb.DNSConfig{ForwarderPort: fwd}
	}
	dc := &mgmtpb.DNSConfig{ServiceEnable: true, ForwarderPort: fwd}
	if m.Domain != "" {
		dc.CustomZones = []*mgmtpb.CustomZone{peerZone(m, cache, b, derived)}
	}
	accountDNS(dc, m.DNS)
	return dc
}

// peerZone is the zone of the peers m shows (see dnsConfig), with their
// records marshaled in b.
func peerZone(m networkmap.Map, cache remoteCache, b *bulk, derived bool) *mgmtpb.CustomZone {
	z := dnszone.Zone(m.Domain)
	if derived {
		z.WiremeshDerivedRecords = true
		return z
	}
	z.Records = make([]*mgmtpb.SimpleRecord, 0, len(m.Peers)+1)
	b.records = make([][]byte, 0, len(m.Peers)+1)
	// The rule of dnszone.Peers: each host's A record, then its AAAA
	// record when the map shows its v6 address.
	self := dnszone.Host{FQDN: m.Self.FQDN(m.Domain), IP: m.Self.IP}
	if m.SelfV6 {
		self.IPv6 = m.Self.IPv6
	}
	for _, r := range []*mgmtpb.SimpleRecord{dnszone.Record(m.Domain, self), dnszone.RecordAAAA(m.Domain, self)} {
		if r != nil {
			w, _ := proto.MarshalOptions{Deterministic: true}.Marshal(r)
			z.Records = append(z.Records, r)
			b.records = append(b.records, w)
		}
	}
	for _, p := range m.Peers {
		v6 := m.ShowsV6(p)
		sh, ok := cache[p.ID]
		if !ok {
			sh = newShown(p, m.Domain, v6)
		}
		if sh.rec != nil {
			z.Records = append(z.Records, sh.rec)
			b.records = append(b.records, sh.recWire)
		}
		if v6 && sh.rec6 != nil {
			z.Records = append(z.Records, sh.rec6)
			b.records = append(b.records, sh.rec6Wire)
		}
	}
	return z
}

// syncResponse is a full update; cfg may be nil for a map-only push.
func syncResponse(m networkmap.Map, cfg *mgmtpb.NetbirdConfig, to respFor, cache remoteCache) (*mgmtpb.SyncResponse, *bulk) {
	nm, b := networkMapProto(m, cache, to)
	r := &mgmtpb.SyncResponse{NetbirdConfig: cfg, NetworkMap: nm}
	if len(m.CheckFiles) > 0 {
		// The agent reports on these (exists, process running) in its meta.
		r.Checks = []*mgmtpb.Checks{{Files: m.CheckFiles}}
	}
	if to.legacy {
		r.PeerConfig = nm.PeerConfig
		r.RemotePeers = nm.RemotePeers
		r.RemotePeersIsEmpty = nm.RemotePeersIsEmpty
	}
	return r, b
}

// deletedResponse tells a removed peer to drop every connection, as the
// reference does before closing its stream.
func deletedResponse(serial uint64) *mgmtpb.SyncResponse {
	return &mgmtpb.SyncResponse{
		RemotePeers:        []*mgmtpb.RemotePeerConfig{},
		RemotePeersIsEmpty: true,
		NetworkMap: &mgmtpb.NetworkMap{
			Serial:                     serial,
			RemotePeersIsEmpty:         true,
			FirewallRulesIsEmpty:       true,
			RoutesFirewallRulesIsEmpty: true,
			DNSConfig:                  &mgmtpb.DNSConfig{},
		},
	}
}

var protocols = map[string]mgmtpb.RuleProtocol{
	account.ProtoAll: mgmtpb.RuleProtocol_ALL, account.ProtoTCP: mgmtpb.RuleProtocol_TCP,
	account.ProtoUDP: mgmtpb.RuleProtocol_UDP, account.ProtoICMP: mgmtpb.RuleProtocol_ICMP,
}

// firewallRules encodes rules as the spec's FirewallRule messages: one per
// port or port range (none: all ports), with the peer both as the legacy
// PeerIP and as a /32 source prefix (/128, 17 bytes, for a v6 twin).
func firewallRules(rs []networkmap.FirewallRule) []*mgmtpb.FirewallRule {
	var out []*mgmtpb.FirewallRule
	for _, r := range rs {
		base := &mgmtpb.FirewallRule{PeerIP: r.Peer.String(), Direction: mgmtpb.RuleDirection_IN, Action: mgmtpb.RuleAction_ACCEPT,
			Protocol: protocols[r.Protocol], PolicyID: []byte(r.PolicyID)}
		if r.Direction == networkmap.Out {
			base.Direction = mgmtpb.RuleDirection_OUT
		}
		if r.Action == account.ActionDrop {
			base.Action = mgmtpb.RuleAction_DROP
		}
		if r.Peer.IsValid() {
			base.SourcePrefixes = [][]byte{compactip.Addr(r.Peer)}
		}
		if len(r.Ports) == 0 && len(r.Ranges) == 0 {
			out = append(out, base)
			continue
		}
		for _, p := range r.Ports {
			fr := proto.Clone(base).(*mgmtpb.FirewallRule)
			fr.Port = strconv.Itoa(int(p))
			fr.PortInfo = &mgmtpb.PortInfo{PortSelection: &mgmtpb.PortInfo_Port{Port: uint32(p)}}
			out = append(out, fr)
		}
		for _, pr := range r.Ranges {
			fr := proto.Clone(base).(*mgmtpb.FirewallRule)
			fr.PortInfo = &mgmtpb.PortInfo{PortSelection: &mgmtpb.PortInfo_Range_{Range: &mgmtpb.PortInfo_Range{Start: uint32(pr.Start), End: uint32(pr.End)}}}
			out = append(out, fr)
		}
	}
	return out
}

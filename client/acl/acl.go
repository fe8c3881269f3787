// Package acl is the agent's stateful packet filter for the userspace
// WireGuard path. It applies the network map's firewall rules to traffic
// between this machine and its peers: packets arriving from the tunnel
// reach the host only when an inbound rule accepts them, they answer a
// connection this host opened, or they go to a port of the agent's own
// open to every map peer (Services: the SSH server); what the host sends
// is allowed unless an outbound drop rule matches, and tracked so its
// replies pass.
package acl

import (
	"encoding/binary"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// IP protocol numbers the rules name.
const (
	ProtoAny  = 0
	ProtoICMP = 1
	ProtoTCP  = 6
	ProtoUDP  = 17
)

// Rule is one firewall rule, from this peer's point of view.
type Rule struct {
	Peer    netip.Addr // the remote peer; the zero Addr matches any
	Inbound bool       // connections from Peer to us (else from us to Peer)
	Accept  bool       // accept (else drop)
	Proto   uint8      // ProtoAny, ProtoICMP, ProtoTCP or ProtoUDP
	// PortLo..PortHi is the destination port range (0, 0: any port).
	PortLo, PortHi uint16
}

func (r Rule) matches(peer netip.Addr, proto uint8, dport uint16, hasPorts bool) bool {
	if r.Peer.IsValid() && !r.Peer.IsUnspecified() && r.Peer != peer {
		return false
	}
	if r.Proto != ProtoAny && r.Proto != proto {
		return false
	}
	if r.PortLo == 0 && r.PortHi == 0 {
		return true
	}
	return hasPorts && dport >= r.PortLo && dport <= r.PortHi
}

// flow identifies a connection by what this host sent: local and remote
// address, protocol and ports (for ICMP echo, the identifier as both).
type flow struct {
	proto         uint8
	local, remote netip.Addr
	lport, rport  uint16
}

// Idle times after which a tracked connection is forgotten.
const (
	tcpIdle   = 10 * time.Minute
	otherIdle = 2 * time.Minute
)

// DefaultMaxFlows caps the connection table. Forwarded flows (a peer
// allowed through this routing peer, or a LAN host answering) may fill
// it only up to MaxFlows - MaxFlows/16: the rest stays for the host's
// own connections, so a peer spraying SYNs through an exit node cannot
// cut the host's replies.
const DefaultMaxFlows = 65536

// Options configure a Filter; the zero value is the production default.
type Options struct {
	// Log reports the table filling up (rate-limited); nil: silent.
	Log *slog.Logger
	// MaxFlows caps the connection table (0: DefaultMaxFlows).
	MaxFlows int
	// HostAddrs lists this host's own addresses (nil: the OS's
	// interfaces). Packets to them are the host's, whatever interface
	// holds them.
	HostAddrs func() ([]netip.Addr, error)
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Filter is safe for concurrent use (WireGuard reads and writes the TUN
// from different goroutines).
type Filter struct {
	mu sync.RWMutex
	// the rules, split by what the packet path asks
	outDrop, inDrop, inAccept []Rule
	allowAll                  bool
	svc                       services // service.go
	// local is this host's overlay address and overlay the network (both
	// zero until SetOverlay: every destination is then this host's);
	// local6 and overlay6 the same on the IPv6 overlay (zero without an
	// IPv6 address: no IPv6 source is then a peer).
	local, local6     netip.Addr
	overlay, overlay6 netip.Prefix
	// forwarding (route.go)
	routed                 []netip.Prefix
	routeAll               bool
	routeDrop, routeAccept []RouteRule

	cmu   sync.RWMutex
	flows map[flow]time.Time
	swept time.Time
	// fullSwept is the last sweep forced by a full table, loggedFull the
	// last log of untracked flows (both under cmu).
	fullSwept, loggedFull time.Time
	maxFlows              int
	untracked             atomic.Uint64

	hostSrc    func() ([]netip.Addr, error)
	hosts      atomic.Pointer[hostAddrs]
	refreshing atomic.Bool

	log *slog.Logger
	now func() time.Time
}

// New returns a filter with the default Options.
func New() *Filter { return NewWithOptions(Options{}) }

// NewWithOptions returns a filter that accepts everything until SetRules
// says otherwise (a map with no rules at all comes from an old server).
func NewWithOptions(o Options) *Filter {
	f := &Filter{allowAll: true, flows: map[flow]time.Time{}, now: o.Now, maxFlows: o.MaxFlows, hostSrc: o.HostAddrs, log: o.Log}
	if f.now == nil {
		f.now = time.Now
	}
	if f.maxFlows <= 0 {
		f.maxFlows = DefaultMaxFlows
	}
	if f.hostSrc == nil {
		f.hostSrc = osHostAddrs
	}
	return f
}

// UntrackedFlows counts the flows not tracked because the table was full
// (their later packets go through the rules again; see track).
func (f *Filter) UntrackedFlows() uint64 { return f.untracked.Load() }

// SetRules replaces the rules. allowAll admits every inbound packet (drop
// rules still apply). Tracked connections stay: a policy change does not
// cut replies to what the host already opened.
func (f *Filter) SetRules(rules []Rule, allowAll bool) {
	var outDrop, inDrop, inAccept []Rule
	for _, r := range rules {
		switch {
		case r.Inbound && r.Accept:
			inAccept = append(inAccept, r)
		case r.Inbound:
			inDrop = append(inDrop, r)
		case !r.Accept:
			outDrop = append(outDrop, r)
		}
	}
	f.mu.Lock()
	f.outDrop, f.inDrop, f.inAccept, f.allowAll = outDrop, inDrop, inAccept, allowAll
	f.mu.Unlock()
}

// packet is the part of an IPv4 header the filter reads.
type packet struct {
	proto        uint8
	src, dst     netip.Addr
	sport, dport uint16
	hasPorts     bool
	icmpEcho     bool // echo request or reply: dport holds the identifier
	icmpReply    bool
	tcpSyn       bool // SYN without ACK: a new connection
}

func parse(b []byte) (packet, bool) {
	var p packet
	if len(b) >= 40 && b[0]>>4 == 6 {
		return parse6(b)
	}
	if len(b) < 20 || b[0]>>4 != 4 {
		return p, false
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < 20 || len(b) < ihl {
		return p, false
	}
	p.proto = b[9]
	p.src = netip.AddrFrom4([4]byte(b[12:16]))
	p.dst = netip.AddrFrom4([4]byte(b[16:20]))
	if binary.BigEndian.Uint16(b[6:8])&0x1fff != 0 {
		return p, true // a later fragment: no transport header
	}
	return p.transport(b[ihl:]), true
}

// parse6 reads an IPv6 header whose transport header follows directly
// (routed traffic to IPv6 networks and exit nodes). Extension headers are
// not walked: such packets match protocol-only rules.
func parse6(b []byte) (packet, bool) {
	p := packet{proto: b[6], src: netip.AddrFrom16([16]byte(b[8:24])), dst: netip.AddrFrom16([16]byte(b[24:40]))}
	if p.proto == protoICMPv6 {
		p.proto = ProtoICMP // rules name one ICMP for both families
		if l4 := b[40:]; len(l4) >= 8 && (l4[0] == 128 || l4[0] == 129) {
			p.icmpEcho, p.icmpReply = true, l4[0] == 129
			id := binary.BigEndian.Uint16(l4[4:6])
			p.sport, p.dport = id, id
		}
		return p, true
	}
	return p.transport(b[40:]), true
}

const protoICMPv6 = 58

// transport reads ports and flags from the transport header l4.
func (p packet) transport(l4 []byte) packet {
	switch p.proto {
	case ProtoTCP, ProtoUDP:
		if len(l4) < 4 {
			return p
		}
		p.sport, p.dport, p.hasPorts = binary.BigEndian.Uint16(l4[0:2]), binary.BigEndian.Uint16(l4[2:4]), true
		if p.proto == ProtoTCP && len(l4) >= 14 {
			flags := l4[13]
			p.tcpSyn = flags&0x02 != 0 && flags&0x10 == 0
		}
	case ProtoICMP:
		if len(l4) >= 8 && (l4[0] == 8 || l4[0] == 0) {
			p.icmpEcho, p.icmpReply = true, l4[0] == 0
			id := binary.BigEndian.Uint16(l4[4:6])
			p.sport, p.dport = id, id
		}
	}
	return p
}

// Outbound decides on a packet the host sends into the tunnel, and tracks
// it so that the replies may come back.
func (f *Filter) Outbound(b []byte) bool {
	p, ok := parse(b)
	if !ok {
		return true // not IP: nothing of ours to filter
	}
	f.mu.RLock()
	outDrop, local, local6 := f.outDrop, f.local, f.local6
	f.mu.RUnlock()
	for _, r := range outDrop {
		if r.matches(p.dst, p.proto, p.dport, p.hasPorts) {
			return false
		}
	}
	if p.hasPorts || p.icmpEcho {
		// Not from this host: a routed LAN host answering or opening
		// towards a peer, which counts against the forwarded share.
		forwarded := local.IsValid() && p.src != local && p.src != local6 && !f.isHost(p.src)
		f.track(flow{proto: p.proto, local: p.src, remote: p.dst, lport: p.sport, rport: p.dport}, forwarded)
	}
	return true
}

// Inbound decides on a packet from the tunnel before it reaches the host,
// or, for another destination, before the host forwards it (route.go).
func (f *Filter) Inbound(b []byte) bool {
	f.mu.RLock()
	inDrop, inAccept, allowAll, local, overlay := f.inDrop, f.inAccept, f.allowAll, f.local, f.overlay
	local6, overlay6, svc := f.local6, f.overlay6, f.svc
	f.mu.RUnlock()
	if allowAll && len(inDrop) == 0 && !local.IsValid() {
		return true // the common All-to-All case before routing is known
	}
	p, ok := parse(b)
	if !ok {
		return false
	}
	// The host's other addresses (LAN, public, bridges) are delivered
	// locally by the kernel: they are this host, judged by the peer
	// rules, not a routed destination the route rules would open.
	if local.IsValid() && p.dst != local && p.dst != local6 && !f.isHost(p.dst) {
		return f.forward(p)
	}
	for _, r := range inDrop {
		if r.matches(p.src, p.proto, p.dport, p.hasPorts) {
			return false
		}
	}
	// A reply to a connection this host opened.
	if (p.hasPorts && !p.tcpSyn) || (p.icmpEcho && p.icmpReply) {
		if f.known(flow{proto: p.proto, local: p.dst, remote: p.src, lport: p.dport, rport: p.sport}) {
			return true
		}
	}
	// From a routed network (a routing peer forwarding its LAN): only
	// replies pass, the peer rules name overlay addresses. An IPv6 source
	// is a peer only inside the IPv6 overlay (none without one).
	if overlay.IsValid() {
		ov := overlay
		if !p.src.Is4() {
			ov = overlay6
		}
		if !ov.IsValid() || !ov.Contains(p.src) {
			return false
		}
	}
	if allowAll || svc.admits(p) {
		return true
	}
	if p.icmpEcho && p.icmpReply {
		return false // an unsolicited echo reply
	}
	for _, r := range inAccept {
		if r.matches(p.src, p.proto, p.dport, p.hasPorts) {
			return true
		}
	}
	return false
}

// track remembers fl (or refreshes it). A new flow is not tracked when
// the table is full: forwarded ones beyond their share, the host's own
// at the cap. That degrades, it does not break: a forwarded flow's next
// packets are judged by the route rules again (the same verdict, the
// rules are stateless), and replies sent into the tunnel pass Outbound
// untracked. What is lost while full is the way back for flows opened
// from the LAN (or this host) towards peers that no inbound rule admits.
func (f *Filter) track(fl flow, forwarded bool) {
	now := f.now()
	// Every outbound packet passes here: refresh a flow at most once a
	// second, under the read lock otherwise.
	f.cmu.RLock()
	t, ok := f.flows[fl]
	f.cmu.RUnlock()
	if ok && now.Sub(t) < time.Second {
		return
	}
	f.cmu.Lock()
	defer f.cmu.Unlock()
	if now.Sub(f.swept) > time.Minute {
		f.sweep(now)
	}
	if _, ok := f.flows[fl]; !ok {
		limit := f.maxFlows
		if forwarded {
			limit -= f.maxFlows / 16
		}
		if len(f.flows) >= limit && now.Sub(f.fullSwept) >= time.Second {
			// Full: drop what expired, at most once a second (a sweep
			// walks the whole table).
			f.fullSwept = now
			f.sweep(now)
		}
		if len(f.flows) >= limit {
			n := f.untracked.Add(1)
			if f.log != nil && now.Sub(f.loggedFull) >= time.Minute {
				f.loggedFull = now
				f.log.Warn("packet filter: connection table full, new flows not tracked",
					"entries", len(f.flows), "forwarded", forwarded, "untracked_total", n)
			}
			return
		}
	}
	f.flows[fl] = now
}

// sweep forgets idle flows; cmu is held.
func (f *Filter) sweep(now time.Time) {
	for k, t := range f.flows {
		if now.Sub(t) > idleFor(k.proto) {
			delete(f.flows, k)
		}
	}
	f.swept = now
}

func (f *Filter) known(fl flow) bool {
	f.cmu.RLock()
	defer f.cmu.RUnlock()
	t, ok := f.flows[fl]
	if !ok {
		return false
	}
	return f.now().Sub(t) <= idleFor(fl.proto)
}

// idleFor is how long a flow of the protocol is remembered without traffic.
func idleFor(proto uint8) time.Duration {
	if proto == ProtoTCP {
		return tcpIdle
	}
	return otherIdle
}

package wg

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wiremesh/wiremesh/internal/key"
)

// ErrNoKernel reports that the kernel has no WireGuard (no module, or not
// allowed to create one): the agent then runs wireguard-go.
var ErrNoKernel = errors.New("no kernel WireGuard")

// External drives a WireGuard interface the agent does not run itself
// (Linux kernel WireGuard, or any implementation wgctrl configures) with
// the same peer model as Device. ICE, probes and relays stay on the
// agent's own UDP socket (a Bind); the interface sees each peer at a
// loopback socket of the agent's that carries the peer's packets to and
// from the path the peer connection chose.
type External struct {
	name   string
	wgc    *wgctrl.Client
	bind   *Bind
	log    *slog.Logger
	iface  netip.AddrPort // the interface's own UDP port, on loopback
	remove func() error

	mu       sync.RWMutex
	proxies  map[key.Public]*proxy
	byRemote map[string]*proxy // a path (Endpoint.DstToString) -> its peer's proxy
	closed   bool
	wg       sync.WaitGroup
}

// proxy is one peer's loopback socket: the interface's endpoint for it.
type proxy struct {
	local *net.UDPConn
	to    atomic.Pointer[conn.Endpoint] // the path its packets leave by
	at    string                        // to's DstToString, the byRemote key
}

// NewKernel creates a kernel WireGuard interface and drives it through
// wgctrl; ErrNoKernel when this kernel cannot.
func NewKernel(c Config, log *slog.Logger) (*External, error) {
	la := netlink.NewLinkAttrs()
	la.Name, la.MTU = c.Name, c.MTU
	if la.MTU == 0 {
		la.MTU = 1280
	}
	link := &netlink.Wireguard{LinkAttrs: la}
	if err := netlink.LinkAdd(link); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOTSUP) {
			return nil, fmt.Errorf("%w: %v", ErrNoKernel, err)
		}
		return nil, fmt.Errorf("create kernel WireGuard interface %s: %w", c.Name, err)
	}
	e, err := NewExternal(c, func() error { return netlink.LinkDel(link) }, log)
	if err != nil {
		_ = netlink.LinkDel(link)
		return nil, err
	}
	return e, nil
}

// NewExternal takes over the WireGuard interface c.Name, which exists:
// sets its key and a loopback-only role for its port, and opens the
// agent's socket on c.Port. remove (may be nil) deletes the interface at
// Close.
func NewExternal(c Config, remove func() error, log *slog.Logger) (*External, error) {
	wgc, err := wgctrl.New()
	if err != nil {
		return nil, fmt.Errorf("wgctrl: %w", err)
	}
	port, err := configurePort(wgc, c.Name, wgtypes.Key(c.Private))
	if err != nil {
		wgc.Close()
		return nil, fmt.Errorf("configure WireGuard interface %s: %w", c.Name, err)
	}
	e := &External{
		name: c.Name, wgc: wgc, bind: NewBind(log), log: log, remove: remove,
		iface:    netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(port)),
		proxies:  map[key.Public]*proxy{},
		byRemote: map[string]*proxy{},
	}
	fns, _, err := e.bind.Open(uint16(c.Port))
	if err != nil && c.Port != 0 {
		log.Warn("WireGuard port busy, using a random one", "port", c.Port, "err", err)
		fns, _, err = e.bind.Open(0)
	}
	if err != nil {
		wgc.Close()
		return nil, fmt.Errorf("open the agent's UDP port: %w", err)
	}
	for _, fn := range fns {
		e.wg.Add(1)
		go func() { defer e.wg.Done(); e.receive(fn) }()
	}
	return e, nil
}

// configurePort sets the interface's key and its own UDP port, which only
// the peers' loopback proxies talk to. The port is chosen here, not left
// at 0: WireGuard picks a port for 0 only when the link comes up (and a
// new one at every up), so one read before that is 0 and the proxies
// would not know where the interface's packets come from (seen with
// wireguard-go, which brings its device up asynchronously).
func configurePort(wgc *wgctrl.Client, name string, priv wgtypes.Key) (int, error) {
	var err error
	for range 5 { // a port free a moment ago may be taken by now
		var port int
		if port, err = freeUDPPort(); err != nil {
			return 0, err
		}
		if err = wgc.ConfigureDevice(name, wgtypes.Config{PrivateKey: &priv, ListenPort: &port, ReplacePeers: true}); err == nil {
			return port, nil
		}
	}
	return 0, err
}

// freeUDPPort is a UDP port nothing listens on (IPv4 or IPv6 wildcard, as
// WireGuard binds).
func freeUDPPort() (int, error) {
	lc, err := net.ListenUDP("udp", &net.UDPAddr{})
	if err != nil {
		return 0, fmt.Errorf("find a free UDP port: %w", err)
	}
	defer lc.Close()
	return lc.LocalAddr().(*net.UDPAddr).Port, nil
}

// receive hands what arrives on the agent's socket (direct or relayed)
// to the interface, through the proxy of the peer whose path it came by.
func (e *External) receive(fn conn.ReceiveFunc) {
	n := e.bind.BatchSize()
	bufs, sizes, eps := make([][]byte, n), make([]int, n), make([]conn.Endpoint, n)
	for i := range bufs {
		bufs[i] = make([]byte, packetSize)
	}
	for {
		got, err := fn(bufs, sizes, eps)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || e.isClosed() {
				return
			}
			e.log.Debug("external WireGuard receive", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		for i := range got {
			e.mu.RLock()
			p := e.byRemote[eps[i].DstToString()]
			e.mu.RUnlock()
			if p != nil {
				_, _ = p.local.WriteToUDPAddrPort(bufs[i][:sizes[i]], e.iface)
			}
		}
	}
}

// send carries what the interface sends to a peer's proxy out by the
// peer's path.
func (e *External) send(p *proxy) {
	buf := make([]byte, packetSize)
	for {
		n, from, err := p.local.ReadFromUDPAddrPort(buf)
		if err != nil {
			return // closed
		}
		if from != e.iface {
			continue // only the interface talks to a proxy
		}
		if to := p.to.Load(); to != nil {
			_ = e.bind.Send([][]byte{buf[:n]}, *to)
		}
	}
}

func (e *External) isClosed() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.closed
}

// Name is the interface name.
func (e *External) Name() string { return e.name }

// Bind is the agent's socket (ICE, probes, relays).
func (e *External) Bind() *Bind { return e.bind }

// Port is the agent's UDP port, where peers reach it.
func (e *External) Port() int { return e.bind.Port() }

// SetAddress assigns the overlay address and brings the link up.
func (e *External) SetAddress(p netip.Prefix, mtu int) error { return setAddress(e.name, p, mtu) }

// SetAddress6 assigns the IPv6 overlay address (the zero Prefix removes it).
func (e *External) SetAddress6(p netip.Prefix) error { return setAddress6(e.name, p) }

// SetPeer adds or updates a peer; an endpoint routes its traffic by that
// path (through the peer's proxy).
func (e *External) SetPeer(p Peer) error {
	pc := wgtypes.PeerConfig{PublicKey: wgtypes.Key(p.Key), ReplaceAllowedIPs: true}
	for _, ip := range p.AllowedIPs {
		pc.AllowedIPs = append(pc.AllowedIPs, net.IPNet{IP: ip.Addr().AsSlice(), Mask: net.CIDRMask(ip.Bits(), ip.Addr().BitLen())})
	}
	if p.Keepalive > 0 {
		ka := p.Keepalive
		pc.PersistentKeepaliveInterval = &ka
	}
	if p.Endpoint != "" {
		to, err := e.bind.ParseEndpoint(p.Endpoint)
		if err != nil {
			return fmt.Errorf("peer endpoint %q: %w", p.Endpoint, err)
		}
		px, err := e.route(p.Key, to)
		if err != nil {
			return err
		}
		pc.Endpoint = net.UDPAddrFromAddrPort(px.local.LocalAddr().(*net.UDPAddr).AddrPort())
	}
	if err := e.wgc.ConfigureDevice(e.name, wgtypes.Config{Peers: []wgtypes.PeerConfig{pc}}); err != nil {
		return fmt.Errorf("configure peer %s: %w", p.Key, err)
	}
	return nil
}

// route points k's proxy (opened on first use) at path to.
func (e *External) route(k key.Public, to conn.Endpoint) (*proxy, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, net.ErrClosed
	}
	px := e.proxies[k]
	if px == nil {
		lc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return nil, fmt.Errorf("peer proxy socket: %w", err)
		}
		px = &proxy{local: lc}
		e.proxies[k] = px
		e.wg.Add(1)
		go func() { defer e.wg.Done(); e.send(px) }()
	}
	if px.at != "" && e.byRemote[px.at] == px {
		delete(e.byRemote, px.at)
	}
	px.at = to.DstToString()
	px.to.Store(&to)
	e.byRemote[px.at] = px
	return px, nil
}

// RemovePeer deletes a peer and its proxy.
func (e *External) RemovePeer(k key.Public) error {
	e.mu.Lock()
	px := e.proxies[k]
	delete(e.proxies, k)
	if px != nil && e.byRemote[px.at] == px {
		delete(e.byRemote, px.at)
	}
	e.mu.Unlock()
	if px != nil {
		px.local.Close()
	}
	if err := e.wgc.ConfigureDevice(e.name, wgtypes.Config{Peers: []wgtypes.PeerConfig{{PublicKey: wgtypes.Key(k), Remove: true}}}); err != nil {
		return fmt.Errorf("remove peer %s: %w", k, err)
	}
	return nil
}

// PeerStats reads every peer's counters.
func (e *External) PeerStats() (map[key.Public]Stats, error) {
	d, err := e.wgc.Device(e.name)
	if err != nil {
		return nil, err
	}
	out := make(map[key.Public]Stats, len(d.Peers))
	for _, p := range d.Peers {
		st := Stats{LastHandshake: p.LastHandshakeTime, RxBytes: p.ReceiveBytes, TxBytes: p.TransmitBytes}
		if p.Endpoint != nil {
			st.Endpoint = p.Endpoint.String()
		}
		out[key.Public(p.PublicKey)] = st
	}
	return out, nil
}

// Close removes the interface (when the agent created it) and closes
// every socket.
func (e *External) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	for _, px := range e.proxies {
		px.local.Close()
	}
	e.mu.Unlock()
	_ = e.bind.Close()
	e.bind.Shutdown()
	e.wg.Wait()
	if e.remove != nil {
		if err := e.remove(); err != nil {
			e.log.Warn("remove WireGuard interface", "interface", e.name, "err", err)
		}
	}
	e.wgc.Close()
}

package wg

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"

	"github.com/wiremesh/wiremesh/internal/key"
)

// Device is a userspace WireGuard interface.
type Device struct {
	name string
	tun  tun.Device
	dev  *device.Device
	bind *Bind
	log  *slog.Logger

	// mu6 guards addr6, the IPv6 overlay address SetAddress6 set: macOS
	// and Windows remove an address by naming it.
	mu6   sync.Mutex
	addr6 netip.Prefix
}

// Config describes the interface.
type Config struct {
	Name    string // interface name, unique on the machine
	MTU     int
	Port    int // UDP port shared with ICE (0 picks one)
	Private key.Private
	// Filter, if set, decides on every packet between the host and the
	// tunnel (the peer firewall).
	Filter PacketFilter
}

// New creates the TUN interface and starts WireGuard on it.
func New(c Config, log *slog.Logger) (*Device, error) {
	if c.MTU == 0 {
		c.MTU = 1280
	}
	bind := NewBind(log)
	t, err := tun.CreateTUN(tunName(c.Name), c.MTU)
	if err != nil {
		return nil, fmt.Errorf("create TUN interface %s: %w (the agent needs root or CAP_NET_ADMIN and /dev/net/tun)", c.Name, err)
	}
	name, err := t.Name()
	if err != nil {
		name = c.Name
	}
	wlog := &device.Logger{
		Verbosef: func(f string, a ...any) { log.Debug(fmt.Sprintf(f, a...), "component", "wireguard") },
		Errorf:   func(f string, a ...any) { log.Warn(fmt.Sprintf(f, a...), "component", "wireguard") },
	}
	var td tun.Device = t
	if c.Filter != nil {
		td = &filteredTUN{Device: t, f: c.Filter}
	}
	dev := device.NewDevice(td, bind, wlog)
	d := &Device{name: name, tun: t, dev: dev, bind: bind, log: log}
	if err := dev.IpcSet("private_key=" + hex.EncodeToString(c.Private[:]) + "\n"); err != nil {
		d.Close()
		return nil, fmt.Errorf("configure WireGuard: %w", err)
	}
	if err := dev.Up(); err != nil {
		d.Close()
		return nil, fmt.Errorf("bring WireGuard up: %w", err)
	}
	// Rebinding on a running device reports a busy port at once.
	if err := dev.IpcSet(fmt.Sprintf("listen_port=%d\n", c.Port)); err != nil && c.Port != 0 {
		// The official client falls back to a free port when 51820 is taken.
		log.Warn("WireGuard port busy, using a random one", "port", c.Port, "err", err)
		if err := dev.IpcSet("listen_port=0\n"); err != nil {
			d.Close()
			return nil, fmt.Errorf("open WireGuard UDP port: %w", err)
		}
	}
	return d, nil
}

// Name is the interface name.
func (d *Device) Name() string { return d.name }

// Bind is the shared socket.
func (d *Device) Bind() *Bind { return d.bind }

// Port is the WireGuard/ICE UDP port.
func (d *Device) Port() int { return d.bind.Port() }

// Close removes the interface and closes the socket.
func (d *Device) Close() {
	d.dev.Close() // closes the TUN, which deletes the interface
	d.bind.Shutdown()
}

// Peer is the WireGuard configuration of one remote peer.
type Peer struct {
	Key        key.Public
	AllowedIPs []netip.Prefix
	Endpoint   string // "" keeps the current one
	Keepalive  time.Duration
}

// SetPeer adds or updates a peer, replacing its allowed IPs.
func (d *Device) SetPeer(p Peer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "public_key=%s\nreplace_allowed_ips=true\n", hex.EncodeToString(p.Key[:]))
	for _, ip := range p.AllowedIPs {
		fmt.Fprintf(&b, "allowed_ip=%s\n", ip)
	}
	if p.Endpoint != "" {
		fmt.Fprintf(&b, "endpoint=%s\n", p.Endpoint)
	}
	if p.Keepalive > 0 {
		fmt.Fprintf(&b, "persistent_keepalive_interval=%d\n", int(p.Keepalive.Seconds()))
	}
	return d.dev.IpcSet(b.String())
}

// RemovePeer deletes a peer.
func (d *Device) RemovePeer(k key.Public) error {
	return d.dev.IpcSet(fmt.Sprintf("public_key=%s\nremove=true\n", hex.EncodeToString(k[:])))
}

// Stats are a peer's counters.
type Stats struct {
	LastHandshake time.Time
	RxBytes       int64
	TxBytes       int64
	Endpoint      string
}

// PeerStats reads every peer's counters.
func (d *Device) PeerStats() (map[key.Public]Stats, error) {
	s, err := d.dev.IpcGet()
	if err != nil {
		return nil, err
	}
	out := map[key.Public]Stats{}
	var cur key.Public
	var st Stats
	have := false
	var sec, nsec int64
	flush := func() {
		if have {
			if sec != 0 || nsec != 0 {
				st.LastHandshake = time.Unix(sec, nsec)
			}
			out[cur] = st
		}
	}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		switch k {
		case "public_key":
			flush()
			raw, err := hex.DecodeString(v)
			if err != nil || len(raw) != key.Size {
				have = false
				continue
			}
			copy(cur[:], raw)
			st, sec, nsec, have = Stats{}, 0, 0, true
		case "last_handshake_time_sec":
			sec, _ = strconv.ParseInt(v, 10, 64)
		case "last_handshake_time_nsec":
			nsec, _ = strconv.ParseInt(v, 10, 64)
		case "rx_bytes":
			st.RxBytes, _ = strconv.ParseInt(v, 10, 64)
		case "tx_bytes":
			st.TxBytes, _ = strconv.ParseInt(v, 10, 64)
		case "endpoint":
			st.Endpoint = v
		}
	}
	flush()
	return out, nil
}

// Handshake starts a WireGuard handshake with peer k now. A live peer
// answers it over whatever path carries the traffic, which is how a
// routing peer's liveness is probed. WireGuard sends at most one
// initiation per REKEY_TIMEOUT (5 s) and would drop this one silently
// after a recent one, so the current keys are expired first (which also
// lifts that limit): until the answer, outgoing packets wait in
// WireGuard's queue, one round trip.
func (d *Device) Handshake(k key.Public) error {
	p := d.dev.LookupPeer(device.NoisePublicKey(k))
	if p == nil {
		return fmt.Errorf("handshake: no WireGuard peer %s", k)
	}
	p.ExpireCurrentKeypairs()
	if err := p.SendHandshakeInitiation(false); err != nil {
		return fmt.Errorf("handshake with %s: %w", k, err)
	}
	return nil
}

package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/nftfw"
	"github.com/wiremesh/wiremesh/client/wg"
	"github.com/wiremesh/wiremesh/internal/key"
)

// device is the WireGuard interface: wireguard-go's (wg.Device) or one
// the kernel runs (wg.External).
type device interface {
	Name() string
	Port() int
	Bind() *wg.Bind
	SetAddress(p netip.Prefix, mtu int) error
	SetPeer(p wg.Peer) error
	RemovePeer(k key.Public) error
	PeerStats() (map[key.Public]wg.Stats, error)
	Close()
}

func isKernel(d device) bool {
	_, ok := d.(*wg.External)
	return ok
}

// newDataPlane creates the interface and its firewall, which is in place
// before the interface has an address or a peer.
func newDataPlane(o Options, mtu int) (device, ruleSetter, error) {
	switch o.Firewall {
	case "", FirewallUserspace, FirewallNftables:
	default:
		return nil, nil, fmt.Errorf("unknown firewall %q (want %s or %s)", o.Firewall, FirewallUserspace, FirewallNftables)
	}
	cfg := wg.Config{Name: o.Interface, MTU: mtu, Port: o.WGPort, Private: o.Private}
	if o.KernelWG {
		k, err := wg.NewKernel(cfg, o.Log)
		switch {
		case err == nil:
			// The kernel's packets never pass the agent: only nftables
			// can filter them.
			if o.Firewall == FirewallUserspace {
				o.Log.Warn("kernel WireGuard: the userspace firewall cannot see its packets, using nftables")
			}
			return withNftables(k, o.Log)
		case errors.Is(err, wg.ErrNoKernel):
			o.Log.Info("kernel WireGuard unavailable, using wireguard-go", "reason", err)
		default:
			return nil, nil, err
		}
	}
	if o.Firewall == FirewallNftables {
		d, err := wg.New(cfg, o.Log)
		if err != nil {
			return nil, nil, err
		}
		return withNftables(d, o.Log)
	}
	f := acl.NewWithOptions(acl.Options{Log: o.Log})
	cfg.Filter = f
	d, err := wg.New(cfg, o.Log)
	if err != nil {
		return nil, nil, err
	}
	return d, userspaceFirewall{f}, nil
}

func withNftables(d device, log *slog.Logger) (device, ruleSetter, error) {
	nf, err := nftfw.New(d.Name())
	if err != nil {
		d.Close()
		return nil, nil, fmt.Errorf("%w (the nftables firewall needs nf_tables and CAP_NET_ADMIN)", err)
	}
	return d, nftFirewall{nf, log}, nil
}

// Firewalls (Options.Firewall).
const (
	FirewallUserspace = "userspace"
	FirewallNftables  = "nftables"
)

// ruleSetter enforces the map's firewall rules: the peer rules, and the
// route rules for what this peer forwards (serverroutes.go).
type ruleSetter interface {
	SetRules(rules []acl.Rule, allowAll bool)
	SetOverlay(local netip.Addr, overlay netip.Prefix)
	SetRouting(r acl.Routing)
	close()
}

type userspaceFirewall struct{ f *acl.Filter }

func (u userspaceFirewall) SetRules(rules []acl.Rule, allowAll bool) { u.f.SetRules(rules, allowAll) }
func (u userspaceFirewall) SetOverlay(local netip.Addr, overlay netip.Prefix) {
	u.f.SetOverlay(local, overlay)
}
func (u userspaceFirewall) SetOverlay6(local netip.Addr, overlay netip.Prefix) {
	u.f.SetOverlay6(local, overlay)
}
func (u userspaceFirewall) SetRouting(r acl.Routing) { u.f.SetRouting(r) }
func (u userspaceFirewall) SetServices(s acl.Services) error {
	u.f.SetServices(s) // in memory: cannot fail
	return nil
}
func (userspaceFirewall) close() {}

type nftFirewall struct {
	f   *nftfw.Firewall
	log *slog.Logger
}

// SetRules keeps the last installed rules when the kernel refuses new
// ones: the table is replaced in one transaction or not at all.
func (n nftFirewall) SetRules(rules []acl.Rule, allowAll bool) {
	if err := n.f.SetRules(rules, allowAll); err != nil {
		n.log.Error("firewall rules not applied; the previous ones stay", "err", err)
	}
}

func (n nftFirewall) SetOverlay(_ netip.Addr, overlay netip.Prefix) {
	if err := n.f.SetOverlay(overlay); err != nil {
		n.log.Error("firewall overlay not applied; the previous rules stay", "err", err)
	}
}

func (n nftFirewall) SetOverlay6(_ netip.Addr, overlay netip.Prefix) {
	if err := n.f.SetOverlay6(overlay); err != nil {
		n.log.Error("firewall IPv6 overlay not applied; the previous rules stay", "err", err)
	}
}

func (n nftFirewall) SetRouting(r acl.Routing) {
	if err := n.f.SetRouting(r); err != nil {
		n.log.Error("route firewall rules not applied; the previous ones stay", "err", err)
	}
}

// SetServices returns the kernel's refusal for the caller to retry
// (openSSHPorts); the previous table stays.
func (n nftFirewall) SetServices(s acl.Services) error {
	if err := n.f.SetServices(s); err != nil {
		return fmt.Errorf("nftables: open services: %w", err)
	}
	return nil
}

func (n nftFirewall) close() {
	if err := n.f.Close(); err != nil {
		n.log.Warn("remove the firewall table", "err", err)
	}
}

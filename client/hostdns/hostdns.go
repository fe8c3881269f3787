// Package hostdns points the host's resolver at the agent's DNS service,
// the way the host's own DNS manager expects: systemd-resolved over D-Bus
// (a per-link server and routing domains on the overlay interface),
// NetworkManager over D-Bus, a plain /etc/resolv.conf (client/resolvconf)
// or, as the last resort, a marked block of peer names in /etc/hosts. It
// records what it changed in the agent's state directory before changing
// it, so Restore (on down) and Recover (at the next start after a crash)
// give the host back exactly what it had.
//
// It does not answer queries (client/resolver does) and does not decide
// which domains are the mesh's (the engine converts the network map's DNS
// config into a Config). macOS (scutil) and Windows (NRPT) configurations
// are generated here and unit-tested but not applied: those agents do not
// run here yet.
package hostdns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wiremesh/wiremesh/client/resolvconf"
)

// Mode names how the host's resolver is integrated, as `netbird status -d`
// shows it.
type Mode string

const (
	ModeNone           Mode = ""
	ModeResolved       Mode = "systemd-resolved"
	ModeNetworkManager Mode = "NetworkManager"
	ModeResolvConf     Mode = "resolv.conf"
	ModeHosts          Mode = "hosts file"
	ModeScutil         Mode = "scutil"
	ModeNRPT           Mode = "NRPT"
)

// DefaultHostsPath is the system's hosts file (the last resort).
const DefaultHostsPath = "/etc/hosts"

// Domain is one domain the agent's resolver answers for. MatchOnly
// domains only route queries to it (split DNS, `~domain` in resolved);
// the others are also search domains.
type Domain struct {
	Name      string
	MatchOnly bool
}

// HostEntry is one peer name for the hosts-file mode, which cannot route
// queries and so lists the names themselves.
type HostEntry struct {
	Name string
	Addr netip.Addr
}

// Config is what the host is told. A zero Server means "leave the host
// alone" (Apply then restores).
type Config struct {
	// Server is the agent's resolver on the overlay address.
	Server netip.AddrPort
	// Domains are routed to Server, in this order.
	Domains []Domain
	// RouteAll sends every query to Server (a primary nameserver group
	// exists): `~.` and DefaultRoute in resolved, the highest priority in
	// NetworkManager.
	RouteAll bool
	// Hosts are the peers' names, used only by the hosts-file mode.
	Hosts []HostEntry
}

func (c Config) equal(o Config) bool {
	return c.Server == o.Server && c.RouteAll == o.RouteAll && slices.Equal(c.Domains, o.Domains) && slices.Equal(c.Hosts, o.Hosts)
}

// searchDomains are the non-match-only domains without trailing dots.
func (c Config) searchDomains() []string {
	var out []string
	for _, d := range c.Domains {
		if !d.MatchOnly && !slices.Contains(out, trimDot(d.Name)) {
			out = append(out, trimDot(d.Name))
		}
	}
	return out
}

func trimDot(s string) string { return strings.TrimSuffix(s, ".") }

// safeName reports whether name (final dot optional) is labels of 1..63
// letters, digits, '_' or '-', at most 253 bytes: the only names written
// into the host's files and D-Bus calls. The engine's names were checked
// by the resolver already; this is the last guard before the host, since
// a space or newline would be a word or line of its own in resolv.conf or
// the hosts file.
func safeName(name string) bool {
	name = trimDot(name)
	if name == "" || len(name) > 253 {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if len(label) == 0 || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// checked is c without the domains and host entries safeName refuses.
func (c Config) checked() (Config, []string) {
	var dropped []string
	out := c
	out.Domains, out.Hosts = nil, nil
	for _, d := range c.Domains {
		if safeName(d.Name) {
			out.Domains = append(out.Domains, d)
		} else {
			dropped = append(dropped, d.Name)
		}
	}
	for _, e := range c.Hosts {
		if safeName(e.Name) && e.Addr.IsValid() {
			out.Hosts = append(out.Hosts, e)
		} else {
			dropped = append(dropped, e.Name)
		}
	}
	return out, dropped
}

// ErrUnavailable is returned by a configurator whose DNS manager is not
// running or refuses the change; the Host then tries the next mode.
var ErrUnavailable = errors.New("DNS manager unavailable")

// configurator is one way of integrating with the host: applied again on
// every change, restored once.
type configurator interface {
	mode() Mode
	apply(ctx context.Context, c Config) error
	restore(ctx context.Context) error
	// upstreams are the host's own name servers, where the agent
	// forwards what is not the mesh's (nil when the host keeps using them
	// itself for everything else).
	upstreams(ctx context.Context) []netip.AddrPort
}

// Options configure a Host.
type Options struct {
	// Interface is the overlay interface (resolved and NetworkManager set
	// DNS on it).
	Interface string
	// StateDir keeps the record of what was changed (hostdns.json);
	// empty keeps it in memory only.
	StateDir string
	// ResolvConf is the resolv.conf the resolv.conf mode rewrites (its
	// backup beside the state); a zero Path leaves it alone.
	ResolvConf resolvconf.File
	// HostsPath is the hosts file of the last resort; empty disables it.
	HostsPath string
	// Bus connects to the system D-Bus; nil uses the system bus.
	Bus BusDialer
	// Modes, when set, are the modes to try in order instead of
	// detecting them (tests; NB_DNS_MODE).
	Modes []Mode
	Log   *slog.Logger
	// Now is the clock (tests inject one); nil is time.Now.
	Now func() time.Time
}

// retryBetter is how long a fallback mode (the hosts file after
// systemd-resolved failed, say) stays before an Apply tries the better
// ones again: a DNS manager that was restarting is used once it is back.
const retryBetter = time.Minute

// Host is the agent's hold on the host's resolver. Its methods may be
// called from any goroutine.
type Host struct {
	o Options

	mu     sync.Mutex
	modes  []Mode       // candidates, best first
	cur    configurator // the one applied, nil when the host is its own
	last   Config
	reason string // why the detected mode was chosen
	// dirty are modes whose undo failed: their changes may still be in
	// place, so every state record names them until an undo works, and a
	// crash leaves Recover to try again.
	dirty []Mode
	// triedAt is when the modes were last tried from the best one.
	triedAt time.Time
}

// New detects the host's DNS manager (without changing anything).
func New(ctx context.Context, o Options) *Host {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Bus == nil {
		o.Bus = SystemBus
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &Host{o: o}
	if len(o.Modes) > 0 {
		h.modes, h.reason = o.Modes, "configured"
	} else {
		h.modes, h.reason = detect(ctx, o)
	}
	o.Log.Info("host DNS integration detected", "mode", h.Mode(), "reason", h.reason)
	return h
}

// Mode is the integration in use, or the one that will be used at the
// first Apply.
func (h *Host) Mode() Mode {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur != nil {
		return h.cur.mode()
	}
	if len(h.modes) == 0 {
		return ModeNone
	}
	return h.modes[0]
}

// Applied reports whether the host currently points at the agent.
func (h *Host) Applied() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur != nil
}

// Apply points the host at c.Server for c's domains. It is cheap when
// nothing changed. When the best mode fails, what it changed is undone
// and the next is tried; the error says why none worked.
func (h *Host) Apply(ctx context.Context, c Config) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !c.Server.IsValid() {
		return h.restoreLocked(ctx)
	}
	c, dropped := c.checked()
	if len(dropped) > 0 {
		h.o.Log.Warn("host DNS: names left out (not plain domain names)", "names", dropped)
	}
	if h.cur != nil && h.fallback() && h.o.Now().Sub(h.triedAt) >= retryBetter {
		// Give the better modes another chance from scratch.
		if err := h.restoreLocked(ctx); err != nil {
			return err
		}
	}
	if h.cur != nil {
		if h.last.equal(c) {
			return nil
		}
		if err := h.cur.apply(ctx, c); err == nil {
			h.last = c
			return nil
		} else {
			h.o.Log.Warn("host DNS update failed; trying again from scratch", "mode", h.cur.mode(), "err", err)
		}
		if err := h.restoreLocked(ctx); err != nil {
			return err
		}
	}
	var errs []error
	h.triedAt = h.o.Now()
	for _, m := range h.modes {
		cf := h.configurator(m)
		if cf == nil {
			continue
		}
		// The record comes first: a crash after the change must find it.
		if err := h.saveState(m); err != nil {
			return err
		}
		err := cf.apply(ctx, c)
		if err == nil {
			h.cur, h.last = cf, c
			h.o.Log.Info("host resolver points at the agent", "mode", m, "server", c.Server, "domains", c.Domains, "route_all", c.RouteAll)
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", m, err))
		h.o.Log.Warn("host DNS integration failed; trying the next", "mode", m, "err", err)
		if rerr := cf.restore(ctx); rerr != nil {
			// Its changes may still be there: the record keeps naming it
			// (the next mode's record must not overwrite that).
			h.o.Log.Warn("undo a failed host DNS integration", "mode", m, "err", rerr)
			if !slices.Contains(h.dirty, m) {
				h.dirty = append(h.dirty, m)
			}
		}
		if err := h.saveState(ModeNone); err != nil {
			return err
		}
	}
	if len(errs) == 0 {
		return fmt.Errorf("no way to configure the host's resolver on this system (%s)", h.reason)
	}
	return fmt.Errorf("configure the host's resolver: %w", errors.Join(errs...))
}

// Upstreams are the host's own name servers (for forwarding what is not
// the mesh's), as the mode in use knows them.
func (h *Host) Upstreams(ctx context.Context) []netip.AddrPort {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur == nil {
		return nil
	}
	return h.cur.upstreams(ctx)
}

// Restore gives the host its resolver back. It does nothing when nothing
// is applied.
func (h *Host) Restore(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.restoreLocked(ctx)
}

func (h *Host) restoreLocked(ctx context.Context) error {
	var errs []error
	// Modes whose undo failed earlier get another try on every restore.
	h.dirty = slices.DeleteFunc(h.dirty, func(m Mode) bool {
		cf := h.configurator(m)
		if cf == nil {
			return true
		}
		if err := cf.restore(ctx); err != nil {
			errs = append(errs, fmt.Errorf("restore the host's resolver (%s, left from a failed attempt): %w", m, err))
			return false
		}
		return true
	})
	if h.cur != nil {
		if err := h.cur.restore(ctx); err != nil {
			errs = append(errs, fmt.Errorf("restore the host's resolver (%s): %w", h.cur.mode(), err))
		} else {
			h.o.Log.Info("host resolver restored", "mode", h.cur.mode())
			h.cur, h.last = nil, Config{}
		}
	}
	cur := ModeNone
	if h.cur != nil {
		cur = h.cur.mode()
	}
	if err := h.saveState(cur); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// fallback reports whether the mode in use is not the best candidate.
func (h *Host) fallback() bool {
	return h.cur != nil && len(h.modes) > 0 && h.cur.mode() != h.modes[0]
}

// saveState records cur (ModeNone: none) and the dirty modes, or removes
// the record when there are none.
func (h *Host) saveState(cur Mode) error {
	modes := slices.Clone(h.dirty)
	if cur != ModeNone && !slices.Contains(modes, cur) {
		modes = append([]Mode{cur}, modes...)
	}
	if len(modes) == 0 {
		return h.forget()
	}
	return h.record(stateRecord{Mode: modes[0], Also: modes[1:], Interface: h.o.Interface, HostsPath: h.o.HostsPath})
}

func (h *Host) configurator(m Mode) configurator {
	return newConfigurator(m, h.o)
}

// newConfigurator returns the configurator for m, or nil where m cannot
// work with these options.
func newConfigurator(m Mode, o Options) configurator {
	switch m {
	case ModeResolved:
		return &resolved{iface: o.Interface, bus: o.Bus}
	case ModeNetworkManager:
		return &networkManager{iface: o.Interface, bus: o.Bus}
	case ModeResolvConf:
		if o.ResolvConf.Path == "" {
			return nil
		}
		return &resolvConfFile{f: o.ResolvConf}
	case ModeHosts:
		if o.HostsPath == "" {
			return nil
		}
		return &hostsFile{path: o.HostsPath}
	}
	return platformConfigurator(m, o)
}

// Package forward makes this host a router for its server routes (the
// routes whose routing peer it is): IP forwarding on while it routes a
// network of that address family (for IPv6 with router advertisements
// still accepted, see sysctl.go), and masquerade, per route, for what
// peers send there from the overlay of the route's family. The
// host's previous sysctl values are saved in the state directory before
// they change, and come back when routing stops, on Close, and at the
// next start after a crash. It does not filter (packages acl and nftfw
// do) and does not install routes on clients.
package forward

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Route is one network this host forwards to.
type Route struct {
	Network    netip.Prefix
	Masquerade bool
}

// The forwarding switches, below the proc root.
const (
	sysctlV4 = "sys/net/ipv4/ip_forward"
	sysctlV6 = "sys/net/ipv6/conf/all/forwarding"
)

// nat is the NAT table (nftfw.NAT; a fake in tests).
type nat interface {
	Set(overlays []netip.Prefix, networks []netip.Prefix) error
	Close() error
}

// Options configure a Forwarder.
type Options struct {
	// StateDir keeps what the forwarder changed, so a restart after a
	// crash restores it; empty keeps it in memory only.
	StateDir string
	// Interface is the WireGuard interface (names the file and the NAT
	// table).
	Interface string
	Log       *slog.Logger
	// ProcRoot is where sysctls live ("/proc" unless a test says so).
	ProcRoot string
	// NAT overrides the nftables NAT (tests).
	NAT nat
	// RemoveTable removes a leftover NAT table by name (tests).
	RemoveTable func(name string) error
}

// saved is what was changed: the values to put back.
type saved struct {
	// Sysctl is the previous value of each sysctl changed, by path below
	// the proc root.
	Sysctl map[string]string `json:"sysctl,omitempty"`
	// NATTable is the table installed, to remove.
	NATTable string `json:"nat_table,omitempty"`
}

// Forwarder applies server routes. Its methods are safe for concurrent
// use.
type Forwarder struct {
	o Options

	mu     sync.Mutex
	saved  saved
	routes []Route
	closed bool
	// noNAT: routes asking for masquerade the NAT cannot give (another
	// family than the overlay's), warned about once while they last.
	noNAT map[netip.Prefix]bool
}

// ErrClosed: the forwarder was closed.
var ErrClosed = errors.New("forwarder closed")

// New restores what a crashed run left (its state file), then returns a
// forwarder that changes nothing before Apply.
func New(o Options) (*Forwarder, error) {
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.NAT == nil || o.RemoveTable == nil {
		n, remove, err := nftNAT(o.Interface)
		if err != nil {
			return nil, err
		}
		if o.NAT == nil {
			o.NAT = n
		}
		if o.RemoveTable == nil {
			o.RemoveTable = remove
		}
	}
	f := &Forwarder{o: o, saved: saved{Sysctl: map[string]string{}}}
	if err := f.recover(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *Forwarder) statePath() string {
	if f.o.StateDir == "" {
		return ""
	}
	return filepath.Join(f.o.StateDir, "forward-"+f.o.Interface+".json")
}

// recover undoes what the state file records.
func (f *Forwarder) recover() error {
	p := f.statePath()
	if p == "" {
		return nil
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	var s saved
	if err := json.Unmarshal(b, &s); err != nil {
		f.o.Log.Warn("routing state file is corrupt, ignored", "path", p, "err", err)
		return os.Remove(p)
	}
	f.o.Log.Info("restoring the forwarding settings an earlier run left", "path", p)
	if err := f.undo(s); err != nil {
		return err
	}
	if err := os.Remove(p); err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return nil
}

// undo puts back the sysctls and removes the NAT table s records.
func (f *Forwarder) undo(s saved) error {
	var errs []error
	if s.NATTable != "" {
		if err := f.o.RemoveTable(s.NATTable); err != nil {
			errs = append(errs, err)
		}
	}
	for _, k := range restoreOrder(s.Sysctl) {
		if err := f.write(k, s.Sysctl[k]); err != nil && !ifaceGone(k, err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Apply makes the host forward to routes. overlays are the peers'
// networks, at most one per address family the overlay carries: a
// route's masquerade rewrites sources from the overlay of its family. No
// routes turns forwarding back to what it was.
func (f *Forwarder) Apply(overlays []netip.Prefix, routes []Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	var fam4, fam6 bool
	var masq []netip.Prefix
	noNAT := map[netip.Prefix]bool{}
	for _, r := range routes {
		is4 := r.Network.Addr().Is4()
		fam4, fam6 = fam4 || is4, fam6 || !is4
		switch {
		case !r.Masquerade:
		case !slices.ContainsFunc(overlays, func(o netip.Prefix) bool { return o.IsValid() && o.Addr().Is4() == is4 }):
			// The masquerade rewrites overlay sources: a family the
			// overlay does not carry here has none to rewrite. Say so
			// rather than forward unmasqueraded traffic the network
			// may not route back.
			noNAT[r.Network] = true
			if !f.noNAT[r.Network] {
				f.o.Log.Warn("route asks for masquerade, but this peer has no overlay address of its family; forwarding it without NAT",
					"network", r.Network, "overlay", fmt.Sprint(overlays))
			}
		default:
			masq = append(masq, r.Network)
		}
	}
	f.noNAT = noNAT
	// Record first, change second: a crash in between leaves a record of
	// a value not yet changed, which restoring writes back unchanged.
	next := saved{Sysctl: maps.Clone(f.saved.Sysctl), NATTable: f.saved.NATTable}
	if next.Sysctl == nil {
		next.Sysctl = map[string]string{}
	}
	var errs []error
	targets := f.targets(fam4, fam6)
	want := map[string]bool{}
	for _, t := range targets {
		if _, done := next.Sysctl[t.key]; done {
			want[t.key] = true
			continue
		}
		v, err := f.read(t.key)
		switch {
		case err != nil && t.from != "" && errors.Is(err, fs.ErrNotExist):
			continue // the interface went away meanwhile
		case err != nil:
			errs = append(errs, err)
			continue
		case v == t.value:
			continue // already set: nothing of ours to undo
		case t.from != "" && v != t.from:
			continue // an administrator's own choice, left alone
		}
		next.Sysctl[t.key] = v
		want[t.key] = true
	}
	if len(masq) > 0 {
		next.NATTable = natTable(f.o.Interface)
	}
	if err := f.persist(next); err != nil {
		return err
	}
	f.saved = next
	for _, t := range targets { // in order: RAs stay accepted before forwarding goes on
		if want[t.key] {
			if err := f.write(t.key, t.value); err != nil && !ifaceGone(t.key, err) {
				errs = append(errs, err)
			}
		}
	}
	// What is no longer needed goes back now.
	for _, k := range restoreOrder(f.saved.Sysctl) {
		if want[k] {
			continue
		}
		if err := f.write(k, f.saved.Sysctl[k]); err != nil && !ifaceGone(k, err) {
			errs = append(errs, err)
			continue
		}
		delete(f.saved.Sysctl, k)
	}
	if len(masq) > 0 || f.saved.NATTable != "" {
		if err := f.o.NAT.Set(overlays, masq); err != nil {
			errs = append(errs, err)
		} else if len(masq) == 0 {
			f.saved.NATTable = ""
		}
	}
	f.routes = append([]Route(nil), routes...)
	if err := f.persist(f.saved); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Routes returns what the last Apply asked for.
func (f *Forwarder) Routes() []Route {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Route(nil), f.routes...)
}

// Close restores every sysctl changed and removes the NAT table. It may
// be called more than once.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	err := f.undo(f.saved)
	if err == nil {
		f.saved = saved{}
		err = f.persist(f.saved)
	}
	return err
}

// persist writes s to the state file (or removes it when s is empty).
func (f *Forwarder) persist(s saved) error {
	p := f.statePath()
	if p == "" {
		return nil
	}
	if len(s.Sysctl) == 0 && s.NATTable == "" {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode routing state: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("save %s: %w", p, err)
	}
	return nil
}

func (f *Forwarder) read(k string) (string, error) {
	b, err := os.ReadFile(filepath.Join(f.o.ProcRoot, k))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", k, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (f *Forwarder) write(k, v string) error {
	if err := os.WriteFile(filepath.Join(f.o.ProcRoot, k), []byte(v+"\n"), 0o644); err != nil {
		return fmt.Errorf("set %s=%s: %w", strings.ReplaceAll(strings.TrimPrefix(k, "sys/"), "/", "."), v, err)
	}
	return nil
}

package routes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wiremesh/wiremesh/internal/sockmark"
)

// Policy routing on Linux. The routes go into their own table; one rule
// sends every packet without the agent's mark to that table, so the
// agent's own sockets (marked, see internal/sockmark) keep using the main
// table, and a rule before it consults the main table for everything but
// its default route, so the LAN and other specific routes keep working
// while an exit node holds the default route. Both address families get
// the same rules; an IPv4-only exit node makes the IPv6 default
// unreachable in the table (v6Guard). The numbers are the official
// client's, so tools and firewall rules written for it keep working.
const (
	Table            = 7120
	prioSuppressMain = 105
	prioToTable      = 110
)

type linuxSystem struct {
	cfg     SystemConfig
	h       *netlink.Handle
	table   int
	mark    uint32
	canMark bool
	rec     record // what is installed
	// overlay6: the mesh's IPv6 networks (Manager.SetOverlay). Without
	// the LAN rule, unmarked IPv6 meets the guard's unreachable ::/0 in
	// the table before the main table's overlay route: the table gets
	// the overlay too while the guard is in.
	mu       sync.Mutex
	overlay6 []netip.Prefix
}

func (s *linuxSystem) setOverlay(ps []netip.Prefix) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.overlay6 = slices.DeleteFunc(ps, func(p netip.Prefix) bool { return !p.Addr().Is6() })
}

// NewSystem returns the Linux routing tables, after removing what a
// killed agent left behind (as its state file records).
func NewSystem(cfg SystemConfig) (System, error) {
	h, err := netlink.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("open netlink: %w", err)
	}
	return newLinux(cfg, h, Table, sockmark.Available())
}

func newLinux(cfg SystemConfig, h *netlink.Handle, table int, canMark bool) (*linuxSystem, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &linuxSystem{cfg: cfg, h: h, table: table, mark: sockmark.Mark, canMark: canMark, rec: record{Interface: cfg.Interface, Table: table}}
	old, ok, err := readRecord(cfg.StateFile)
	if err != nil {
		return nil, err
	}
	if ok {
		cfg.Log.Info("removing routes left by an earlier run", "routes", len(old.Routes)+len(old.Unreachable), "rules", len(old.Rules))
		if err := s.remove(old, nil); err != nil {
			return nil, fmt.Errorf("remove routes left by an earlier run: %w", err)
		}
		if err := writeRecord(cfg.StateFile, record{}); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *linuxSystem) rules() []recordRule {
	var out []recordRule
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		if s.cfg.KeepLAN {
			out = append(out, recordRule{Family: fam, Priority: prioSuppressMain, Table: unix.RT_TABLE_MAIN, Suppress: 0})
		}
		out = append(out, recordRule{Family: fam, Priority: prioToTable, Table: s.table, Mark: s.mark, Invert: true})
	}
	return out
}

func (r recordRule) netlink() *netlink.Rule {
	nr := netlink.NewRule()
	nr.Family, nr.Priority, nr.Table = r.Family, r.Priority, r.Table
	if r.Mark != 0 {
		mask := uint32(0xffffffff)
		nr.Mark, nr.Mask, nr.Invert = r.Mark, &mask, r.Invert
	} else {
		nr.SuppressPrefixlen = r.Suppress
	}
	return nr
}

// Apply implements System.
func (s *linuxSystem) Apply(_ context.Context, want []netip.Prefix, keep []netip.Addr) error {
	var cutErr error
	if !s.canMark {
		// Without marks the rules cannot tell the agent's traffic apart.
		left := covering(want, keep)
		want = slices.DeleteFunc(slices.Clone(want), func(p netip.Prefix) bool { return len(left[p]) > 0 })
		cutErr = cutOffError(left)
	}
	guard := v6Guard(want)
	if !s.canMark && len(covering(guard, keep)) > 0 {
		// Unmarked, the guard would take the agent's own IPv6 traffic
		// to its servers too: IPv6 stays open rather than cut them off.
		guard = nil
	}
	if len(guard) > 0 {
		s.mu.Lock()
		for _, o := range s.overlay6 {
			if !slices.Contains(want, o) {
				want = append(slices.Clone(want), o)
			}
		}
		s.mu.Unlock()
	}
	var link netlink.Link
	if len(want) > 0 {
		var err error
		if link, err = s.h.LinkByName(s.cfg.Interface); err != nil {
			return fmt.Errorf("interface %s: %w", s.cfg.Interface, err)
		}
	}
	next := record{Interface: s.cfg.Interface, Table: s.table, Routes: slices.Clone(want), Unreachable: guard}
	if len(want) > 0 {
		next.Rules = s.rules()
	}
	// Record the union first: a crash in between leaves nothing unrecorded.
	union := next
	union.Rules = mergeRules(s.rec.Rules, next.Rules)
	union.Routes = mergePrefixes(s.rec.Routes, next.Routes)
	union.Unreachable = mergePrefixes(s.rec.Unreachable, next.Unreachable)
	if err := writeRecord(s.cfg.StateFile, union); err != nil {
		return err
	}
	var errs []error
	// Routes first, rules after: the rules point at a table that is
	// complete by then, and go last when emptied.
	for _, p := range want {
		if err := s.h.RouteReplace(s.route(p, link.Attrs().Index)); err != nil {
			errs = append(errs, fmt.Errorf("add route %s: %w", p, err))
			next.Routes = slices.DeleteFunc(next.Routes, func(q netip.Prefix) bool { return q == p })
		}
	}
	for _, p := range guard {
		err := s.h.RouteReplace(s.unreachable(p))
		switch {
		case err == nil:
		case errors.Is(err, unix.EAFNOSUPPORT):
			// A host without IPv6 has nothing to leak.
			next.Unreachable = slices.DeleteFunc(next.Unreachable, func(q netip.Prefix) bool { return q == p })
		default:
			// Kept in the record: an earlier apply may have installed it.
			errs = append(errs, fmt.Errorf("make %s unreachable: %w", p, err))
		}
	}
	var noV6 bool
	for _, r := range next.Rules {
		if !slices.Contains(s.rec.Rules, r) {
			err := s.h.RuleAdd(r.netlink())
			switch {
			case err == nil || errors.Is(err, unix.EEXIST):
			case r.Family == unix.AF_INET6 && errors.Is(err, unix.EAFNOSUPPORT):
				noV6 = true // a host without IPv6 needs no IPv6 rules
			default:
				errs = append(errs, fmt.Errorf("add rule %d: %w", r.Priority, err))
			}
		}
	}
	if noV6 {
		next.Rules = slices.DeleteFunc(next.Rules, func(r recordRule) bool { return r.Family == unix.AF_INET6 })
	}
	// A prefix that moved between Routes and Unreachable was replaced in
	// place: deleting it now would take the new route with it.
	stale := record{Table: s.table}
	for _, p := range s.rec.Routes {
		if !slices.Contains(want, p) && !slices.Contains(guard, p) {
			stale.Routes = append(stale.Routes, p)
		}
	}
	for _, p := range s.rec.Unreachable {
		if !slices.Contains(want, p) && !slices.Contains(guard, p) {
			stale.Unreachable = append(stale.Unreachable, p)
		}
	}
	for _, r := range s.rec.Rules {
		if !slices.Contains(next.Rules, r) {
			stale.Rules = append(stale.Rules, r)
		}
	}
	if err := s.remove(stale, link); err != nil {
		errs = append(errs, err)
	}
	s.rec = next
	if err := writeRecord(s.cfg.StateFile, s.rec); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, cutErr)...)
}

func (s *linuxSystem) route(p netip.Prefix, ifindex int) *netlink.Route {
	return &netlink.Route{
		LinkIndex: ifindex, Dst: ipNet(p), Table: s.table, Scope: netlink.SCOPE_LINK,
		Family: family(p.Addr()),
	}
}

func (s *linuxSystem) unreachable(p netip.Prefix) *netlink.Route {
	return &netlink.Route{Dst: ipNet(p), Table: s.table, Type: unix.RTN_UNREACHABLE, Family: family(p.Addr())}
}

// remove deletes a record's rules and routes; what is already gone is not
// an error (the kernel drops a deleted interface's routes itself).
func (s *linuxSystem) remove(r record, link netlink.Link) error {
	var errs []error
	for _, rule := range r.Rules {
		if err := s.h.RuleDel(rule.netlink()); err != nil && !gone(err) {
			errs = append(errs, fmt.Errorf("delete rule %d: %w", rule.Priority, err))
		}
	}
	table := r.Table
	if table == 0 {
		table = s.table
	}
	for _, p := range r.Routes {
		// The scope must match (the kernel matches an IPv4 route by it).
		rt := &netlink.Route{Dst: ipNet(p), Table: table, Family: family(p.Addr()), Scope: netlink.SCOPE_LINK}
		if link != nil {
			rt.LinkIndex = link.Attrs().Index
		}
		if err := s.h.RouteDel(rt); err != nil && !gone(err) {
			errs = append(errs, fmt.Errorf("delete route %s: %w", p, err))
		}
	}
	for _, p := range r.Unreachable {
		rt := s.unreachable(p)
		rt.Table = table
		if err := s.h.RouteDel(rt); err != nil && !gone(err) {
			errs = append(errs, fmt.Errorf("delete unreachable route %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// Close implements System: it removes everything installed.
func (s *linuxSystem) Close(context.Context) error {
	err := s.remove(s.rec, nil)
	s.rec = record{Interface: s.cfg.Interface, Table: s.table}
	if werr := writeRecord(s.cfg.StateFile, record{}); werr != nil {
		err = errors.Join(err, werr)
	}
	s.h.Close()
	return err
}

// gone reports an error saying there is nothing to delete: a host
// without IPv6 (EAFNOSUPPORT) has no IPv6 route or rule of ours.
func gone(err error) bool {
	return errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.EAFNOSUPPORT)
}

func family(a netip.Addr) int {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

func ipNet(p netip.Prefix) *net.IPNet {
	p = p.Masked()
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

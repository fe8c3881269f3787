package routes

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// The command-driven systems (macOS: route(8); Windows: netsh and route)
// share one shape: routes point at the tunnel interface, a default route
// is installed as its two halves so the host's own default route (and with
// it the LAN's) stays, and each server address a route covers gets a host
// route through the original gateway, so the agent's traffic to it never
// enters the tunnel.

// runner runs a command; tests record the commands instead.
type runner func(ctx context.Context, name string, args ...string) ([]byte, error)

func execRunner(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// commands are one system's command lines.
type commands interface {
	addRoute(p netip.Prefix, iface string) []string
	delRoute(p netip.Prefix, iface string) []string
	addHost(a, gw netip.Addr) []string
	delHost(a, gw netip.Addr) []string
	gateway(v6 bool) []string
	parseGateway(out []byte, v6 bool) (netip.Addr, bool)
}

type cmdSystem struct {
	cfg  SystemConfig
	cmds commands
	run  runner
	rec  record
}

func newCmdSystem(ctx context.Context, cfg SystemConfig, cmds commands, run runner) (*cmdSystem, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &cmdSystem{cfg: cfg, cmds: cmds, run: run, rec: record{Interface: cfg.Interface}}
	old, ok, err := readRecord(cfg.StateFile)
	if err != nil {
		return nil, err
	}
	if ok {
		cfg.Log.Info("removing routes left by an earlier run", "routes", len(old.Routes), "bypass", len(old.Bypass))
		if err := s.remove(ctx, old); err != nil {
			return nil, fmt.Errorf("remove routes left by an earlier run: %w", err)
		}
		if err := writeRecord(cfg.StateFile, record{}); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// osPrefixes is what is installed for p: a default route as its halves.
func osPrefixes(p netip.Prefix) []netip.Prefix {
	if p.Bits() != 0 {
		return []netip.Prefix{p.Masked()}
	}
	if p.Addr().Is4() {
		return []netip.Prefix{netip.MustParsePrefix("0.0.0.0/1"), netip.MustParsePrefix("128.0.0.0/1")}
	}
	return []netip.Prefix{netip.MustParsePrefix("::/1"), netip.MustParsePrefix("8000::/1")}
}

func famKey(a netip.Addr) string {
	if a.Is4() {
		return "4"
	}
	return "6"
}

// Apply implements System.
func (s *cmdSystem) Apply(ctx context.Context, want []netip.Prefix, keep []netip.Addr) error {
	gws := map[string]string{}
	for k, v := range s.rec.Gateway {
		gws[k] = v
	}
	// The gateway is looked up again on every apply that needs host
	// routes: a laptop that moved to another network has another one, and
	// host routes through the old gateway would cut the agent off. A
	// failed lookup keeps the gateway known (it may be a passing error).
	asked := map[string]bool{}
	left := map[netip.Prefix][]netip.Addr{}
	var bypass []netip.Addr
	// hostRoutes finds the host routes the prefixes of ps need; those
	// whose gateway is unknown go into left.
	hostRoutes := func(ps []netip.Prefix) {
		for p, addrs := range covering(ps, keep) {
			ok := true
			for _, a := range addrs {
				if fam := famKey(a); !asked[fam] {
					asked[fam] = true
					if gw, found := s.findGateway(ctx, !a.Is4()); found {
						if old, had := gws[fam]; had && old != gw.String() {
							s.cfg.Log.Info("default gateway changed; moving the servers' host routes", "from", old, "to", gw.String())
						}
						gws[fam] = gw.String()
					}
				}
				if _, known := gws[famKey(a)]; !known {
					ok = false
				}
			}
			if !ok {
				left[p] = addrs
				continue
			}
			bypass = append(bypass, addrs...)
		}
	}
	hostRoutes(want)
	// An exit node for IPv4 alone (and installed): IPv6 is routed into
	// the tunnel as the two halves of ::/0 too, where no peer takes it
	// (the exit node's allowed IPs hold no IPv6 default), so it fails at
	// once instead of leaking past the exit node by the host's IPv6
	// default route. The servers' IPv6 addresses get host routes as for
	// any route; without an IPv6 default gateway the host has no IPv6 way
	// out to them (nor anything to leak by), and the guard goes in
	// without them rather than staying out.
	guard := v6Guard(slices.DeleteFunc(slices.Clone(want), func(p netip.Prefix) bool { return len(left[p]) > 0 }))
	hostRoutes(guard)
	for _, p := range guard {
		delete(left, p)
	}
	want = append(slices.Clone(want), guard...)
	slices.SortFunc(bypass, netip.Addr.Compare)
	bypass = slices.Compact(bypass)
	var installs []netip.Prefix
	for _, p := range want {
		if len(left[p]) == 0 {
			installs = append(installs, osPrefixes(p)...)
		}
	}
	slices.SortFunc(installs, comparePrefix)
	installs = slices.Compact(installs)
	next := record{Interface: s.cfg.Interface, Routes: installs, Bypass: bypass, Gateway: gws}
	union := next
	union.Routes = mergePrefixes(s.rec.Routes, installs)
	union.Bypass = append(slices.Clone(s.rec.Bypass), bypass...)
	if err := writeRecord(s.cfg.StateFile, union); err != nil {
		return err
	}
	var errs []error
	// Host routes first: they must be in before a route covering them. A
	// host route through a gateway that is no longer the default one is
	// deleted and added again through the new one.
	for _, a := range bypass {
		had := slices.Contains(s.rec.Bypass, a)
		if had && gwOf(s.rec.Gateway, a) == gwOf(gws, a) {
			continue
		}
		if had {
			if _, err := s.exec(ctx, s.cmds.delHost(a, gwOf(s.rec.Gateway, a))); err != nil {
				errs = append(errs, err)
			}
		}
		if _, err := s.exec(ctx, s.cmds.addHost(a, gwOf(gws, a))); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range installs {
		if !slices.Contains(s.rec.Routes, p) {
			if _, err := s.exec(ctx, s.cmds.addRoute(p, s.cfg.Interface)); err != nil {
				errs = append(errs, err)
				next.Routes = slices.DeleteFunc(next.Routes, func(q netip.Prefix) bool { return q == p })
			}
		}
	}
	var staleRoutes []netip.Prefix
	for _, p := range s.rec.Routes {
		if !slices.Contains(installs, p) {
			staleRoutes = append(staleRoutes, p)
		}
	}
	var staleHosts []netip.Addr
	for _, a := range s.rec.Bypass {
		if !slices.Contains(bypass, a) {
			staleHosts = append(staleHosts, a)
		}
	}
	// Covering routes go before the host routes that protect them.
	if err := s.remove(ctx, record{Interface: s.cfg.Interface, Routes: staleRoutes, Bypass: staleHosts, Gateway: s.rec.Gateway}); err != nil {
		errs = append(errs, err)
	}
	s.rec = next
	if err := writeRecord(s.cfg.StateFile, s.rec); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, cutOffError(left))...)
}

// gatewayRefresh is how often the manager applies again while host routes
// are needed, so that a new default gateway (another network) is followed
// within seconds even when the map does not change.
const gatewayRefresh = 5 * time.Second

func (s *cmdSystem) refreshEvery() time.Duration { return gatewayRefresh }

func gwOf(gws map[string]string, a netip.Addr) netip.Addr {
	gw, _ := netip.ParseAddr(gws[famKey(a)])
	return gw
}

func (s *cmdSystem) findGateway(ctx context.Context, v6 bool) (netip.Addr, bool) {
	out, err := s.exec(ctx, s.cmds.gateway(v6))
	if err != nil {
		s.cfg.Log.Warn("find the default gateway", "err", err)
		return netip.Addr{}, false
	}
	return s.cmds.parseGateway(out, v6)
}

func (s *cmdSystem) exec(ctx context.Context, argv []string) ([]byte, error) {
	return s.run(ctx, argv[0], argv[1:]...)
}

// remove deletes a record's routes, then its host routes.
func (s *cmdSystem) remove(ctx context.Context, r record) error {
	var errs []error
	for _, p := range r.Routes {
		if _, err := s.exec(ctx, s.cmds.delRoute(p, r.Interface)); err != nil {
			errs = append(errs, err)
		}
	}
	for _, a := range r.Bypass {
		if _, err := s.exec(ctx, s.cmds.delHost(a, gwOf(r.Gateway, a))); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close implements System.
func (s *cmdSystem) Close(ctx context.Context) error {
	err := s.remove(ctx, s.rec)
	s.rec = record{Interface: s.cfg.Interface}
	if werr := writeRecord(s.cfg.StateFile, record{}); werr != nil {
		err = errors.Join(err, werr)
	}
	return err
}

// darwinCommands drive route(8).
type darwinCommands struct{}

func inetFlag(a netip.Addr) string {
	if a.Is4() {
		return "-inet"
	}
	return "-inet6"
}

func (darwinCommands) addRoute(p netip.Prefix, iface string) []string {
	return []string{"route", "-n", "add", inetFlag(p.Addr()), "-net", p.String(), "-interface", iface}
}

func (darwinCommands) delRoute(p netip.Prefix, iface string) []string {
	return []string{"route", "-n", "delete", inetFlag(p.Addr()), "-net", p.String(), "-interface", iface}
}

func (darwinCommands) addHost(a, gw netip.Addr) []string {
	return []string{"route", "-n", "add", inetFlag(a), "-host", a.String(), gw.String()}
}

func (darwinCommands) delHost(a, gw netip.Addr) []string {
	return []string{"route", "-n", "delete", inetFlag(a), "-host", a.String(), gw.String()}
}

func (darwinCommands) gateway(v6 bool) []string {
	if v6 {
		return []string{"route", "-n", "get", "-inet6", "default"}
	}
	return []string{"route", "-n", "get", "-inet", "default"}
}

// parseGateway reads "gateway: 192.168.1.1" from `route -n get default`.
func (darwinCommands) parseGateway(out []byte, v6 bool) (netip.Addr, bool) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || strings.TrimSpace(k) != "gateway" {
			continue
		}
		// fe80::1%en0 (the usual IPv6 default gateway) keeps its zone:
		// route(8) needs it to reach a link-local gateway, in the servers'
		// host routes as in the command line it came from.
		a, err := netip.ParseAddr(strings.TrimSpace(v))
		if err != nil || a.Is4() == v6 {
			return netip.Addr{}, false
		}
		return a, true
	}
	return netip.Addr{}, false
}

// windowsCommands drive netsh for the tunnel's routes and route.exe for
// the host routes (it picks the gateway's interface itself).
type windowsCommands struct{}

func netshFamily(a netip.Addr) string {
	if a.Is4() {
		return "ipv4"
	}
	return "ipv6"
}

func (windowsCommands) addRoute(p netip.Prefix, iface string) []string {
	return []string{"netsh", "interface", netshFamily(p.Addr()), "add", "route", "prefix=" + p.String(), "interface=" + iface, "store=active"}
}

func (windowsCommands) delRoute(p netip.Prefix, iface string) []string {
	return []string{"netsh", "interface", netshFamily(p.Addr()), "delete", "route", "prefix=" + p.String(), "interface=" + iface, "store=active"}
}

func (windowsCommands) addHost(a, gw netip.Addr) []string {
	if a.Is4() {
		return []string{"route", "add", a.String(), "mask", "255.255.255.255", gw.String()}
	}
	return []string{"route", "add", a.String() + "/128", gw.String()}
}

func (windowsCommands) delHost(a, gw netip.Addr) []string {
	if a.Is4() {
		return []string{"route", "delete", a.String(), "mask", "255.255.255.255", gw.String()}
	}
	return []string{"route", "delete", a.String() + "/128", gw.String()}
}

func (windowsCommands) gateway(v6 bool) []string {
	if v6 {
		return []string{"route", "print", "-6", "::/0"}
	}
	return []string{"route", "print", "-4", "0.0.0.0"}
}

// parseGateway reads the gateway of the default route from `route print`:
// IPv4 rows are "0.0.0.0 0.0.0.0 GATEWAY INTERFACE METRIC", IPv6 rows
// "IF METRIC ::/0 GATEWAY". The row with the lowest metric wins.
func (windowsCommands) parseGateway(out []byte, v6 bool) (netip.Addr, bool) {
	var best netip.Addr
	bestMetric := -1
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		var gw, metric string
		switch {
		case !v6 && len(f) == 5 && f[0] == "0.0.0.0" && f[1] == "0.0.0.0":
			gw, metric = f[2], f[4]
		case v6 && len(f) == 4 && f[2] == "::/0":
			gw, metric = f[3], f[1]
		default:
			continue
		}
		a, err := netip.ParseAddr(gw)
		if err != nil || a.Is4() == v6 || a.IsUnspecified() {
			continue
		}
		var m int
		if _, err := fmt.Sscan(metric, &m); err != nil {
			continue
		}
		if bestMetric < 0 || m < bestMetric {
			best, bestMetric = a, m
		}
	}
	return best, bestMetric >= 0
}

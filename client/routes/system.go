package routes

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrNotSupported is returned by NewSystem on an operating system the
// agent cannot install routes on.
var ErrNotSupported = errors.New("installing routes is not supported on this operating system")

// ErrCutsOff reports routes left out because they would take the agent's
// own traffic to its servers into the tunnel.
var ErrCutsOff = errors.New("route left out: it would cut the agent off from its servers")

// SystemConfig configures the operating system side.
type SystemConfig struct {
	Interface string // the WireGuard interface routes point to
	// StateFile records what is installed, so that what a killed agent
	// left behind is removed at the next start ("" keeps no record).
	StateFile string
	// KeepLAN keeps the host's directly connected networks (and other
	// specific routes of the main table) outside the tunnel while an
	// exit node carries the default route.
	KeepLAN bool
	Log     *slog.Logger
}

// record is the state file: what this agent installed.
type record struct {
	Interface string         `json:"interface"`
	Table     int            `json:"table,omitempty"`
	Rules     []recordRule   `json:"rules,omitempty"`
	Routes    []netip.Prefix `json:"routes,omitempty"`
	// Unreachable: prefixes made unreachable in the table (v6Guard).
	Unreachable []netip.Prefix `json:"unreachable,omitempty"`
	// Gateway and Bypass: host routes keeping servers outside the tunnel
	// (macOS, Windows).
	Gateway map[string]string `json:"gateway,omitempty"`
	Bypass  []netip.Addr      `json:"bypass,omitempty"`
}

type recordRule struct {
	Family   int    `json:"family"`
	Priority int    `json:"priority"`
	Table    int    `json:"table"`
	Mark     uint32 `json:"mark,omitempty"`
	Invert   bool   `json:"invert,omitempty"`
	Suppress int    `json:"suppress_prefixlength,omitempty"`
}

func readRecord(path string) (record, bool, error) {
	var r record
	if path == "" {
		return r, false, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("read the routes record: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, false, fmt.Errorf("routes record %s: %w", path, err)
	}
	return r, true, nil
}

// writeRecord replaces the record atomically; it is written before the
// system is changed, so it always covers what is installed.
func writeRecord(path string, r record) error {
	if path == "" {
		return nil
	}
	if len(r.Rules) == 0 && len(r.Routes) == 0 && len(r.Unreachable) == 0 && len(r.Bypass) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove the routes record: %w", err)
		}
		return nil
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the routes record: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("routes record directory: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write the routes record: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write the routes record: %w", err)
	}
	return nil
}

// v6Guard is what an exit node for IPv4 alone leaves open: while
// 0.0.0.0/0 enters the tunnel and ::/0 does not (this peer has no IPv6
// overlay address, or the map has no IPv6 default), the host's IPv6
// default route would still carry its internet traffic past the exit
// node. The official client makes ::/0 unreachable in its table then, and
// so do we: IPv6 to the internet fails at once (applications fall back to
// IPv4, through the exit node) instead of leaking. More specific routes
// of the main table (the LAN) still win while the LAN is kept.
func v6Guard(want []netip.Prefix) []netip.Prefix {
	v4, v6 := false, false
	for _, p := range want {
		if p.Bits() == 0 {
			v4, v6 = v4 || p.Addr().Is4(), v6 || p.Addr().Is6()
		}
	}
	if v4 && !v6 {
		return []netip.Prefix{netip.PrefixFrom(netip.IPv6Unspecified(), 0)}
	}
	return nil
}

// covering returns the prefixes of want that contain one of keep.
func covering(want []netip.Prefix, keep []netip.Addr) map[netip.Prefix][]netip.Addr {
	out := map[netip.Prefix][]netip.Addr{}
	for _, p := range want {
		for _, a := range keep {
			if p.Contains(a) {
				out[p] = append(out[p], a)
			}
		}
	}
	return out
}

func cutOffError(left map[netip.Prefix][]netip.Addr) error {
	if len(left) == 0 {
		return nil
	}
	var parts []string
	for p, addrs := range left {
		parts = append(parts, fmt.Sprintf("%s (covers %s)", p, addrs[0]))
	}
	return fmt.Errorf("%w: %s", ErrCutsOff, strings.Join(parts, ", "))
}

func mergeRules(a, b []recordRule) []recordRule {
	out := slices.Clone(a)
	for _, r := range b {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

func mergePrefixes(a, b []netip.Prefix) []netip.Prefix {
	out := slices.Clone(a)
	for _, p := range b {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

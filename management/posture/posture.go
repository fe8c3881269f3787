// Package posture evaluates posture checks against what a peer reports
// about itself (agent version, OS and kernel version, addresses, running
// processes). It is a pure function of the check and the peer's metadata;
// which policies apply the result is networkmap's business. Geolocation
// needs a GeoIP database this server does not ship: such checks are
// refused when they are created (Validate), not silently passed.
package posture

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/wiremesh/wiremesh/management/account"
)

// ErrInvalid is a check that cannot be evaluated as written.
var ErrInvalid = errors.New("invalid posture check")

// Validate checks a posture check's conditions before it is stored.
func Validate(c account.Checks) error {
	if c.NBVersion == nil && c.OSVersion == nil && c.GeoLocation == nil && c.PeerNetworkRange == nil && c.Process == nil {
		return fmt.Errorf("%w: at least one check is needed", ErrInvalid)
	}
	if c.GeoLocation != nil {
		return fmt.Errorf("%w: geolocation checks need a GeoLite2 database, which this server does not have", ErrInvalid)
	}
	if v := c.NBVersion; v != nil {
		if _, ok := parseVersion(v.MinVersion); !ok {
			return fmt.Errorf("%w: min_version %q is not a version", ErrInvalid, v.MinVersion)
		}
	}
	if o := c.OSVersion; o != nil {
		for _, v := range []string{str(o.Android), str(o.Darwin), str(o.IOS), kern(o.Linux), kern(o.Windows)} {
			if _, ok := parseVersion(v); v != "" && !ok {
				return fmt.Errorf("%w: OS version %q is not a version", ErrInvalid, v)
			}
		}
	}
	if r := c.PeerNetworkRange; r != nil {
		if r.Action != "allow" && r.Action != "deny" {
			return fmt.Errorf("%w: network range action %q (want allow or deny)", ErrInvalid, r.Action)
		}
		if len(r.Ranges) == 0 {
			return fmt.Errorf("%w: network range check without ranges", ErrInvalid)
		}
		for _, s := range r.Ranges {
			if _, err := netip.ParsePrefix(s); err != nil {
				return fmt.Errorf("%w: range %q: %w", ErrInvalid, s, err)
			}
		}
	}
	if p := c.Process; p != nil {
		if len(p.Processes) == 0 {
			return fmt.Errorf("%w: process check without processes", ErrInvalid)
		}
		for _, pr := range p.Processes {
			if pr.LinuxPath == "" && pr.MacPath == "" && pr.WindowsPath == "" {
				return fmt.Errorf("%w: a process needs a path for at least one OS", ErrInvalid)
			}
		}
	}
	return nil
}

func str(v *account.MinVersion) string {
	if v == nil {
		return ""
	}
	return v.MinVersion
}

func kern(v *account.MinKernel) string {
	if v == nil {
		return ""
	}
	return v.MinKernelVersion
}

// Passes reports whether the peer meets every condition, and if not, why.
func Passes(c account.Checks, m account.Meta) (bool, string) {
	if v := c.NBVersion; v != nil && !atLeast(m.NetbirdVersion, v.MinVersion) {
		return false, fmt.Sprintf("agent version %q below %s", m.NetbirdVersion, v.MinVersion)
	}
	if o := c.OSVersion; o != nil {
		if ok, why := osPasses(o, m); !ok {
			return false, why
		}
	}
	if c.GeoLocation != nil {
		return false, "geolocation cannot be checked"
	}
	if r := c.PeerNetworkRange; r != nil {
		in := inRanges(r.Ranges, m)
		if r.Action == "allow" && !in {
			return false, "no address in the allowed ranges"
		}
		if r.Action == "deny" && in {
			return false, "an address in a denied range"
		}
	}
	if p := c.Process; p != nil {
		for _, pr := range p.Processes {
			path := ProcessPath(pr, m.GoOS)
			if path == "" || !running(m.Files, path) {
				return false, fmt.Sprintf("process %q not running", path)
			}
		}
	}
	return true, ""
}

func osPasses(o *account.OSVersionCheck, m account.Meta) (bool, string) {
	var min, have string
	switch strings.ToLower(m.GoOS) {
	case "android":
		min, have = str(o.Android), m.OSVersion
	case "darwin":
		min, have = str(o.Darwin), m.OSVersion
	case "ios":
		min, have = str(o.IOS), m.OSVersion
	case "linux":
		min, have = kern(o.Linux), m.KernelVersion
	case "windows":
		min, have = kern(o.Windows), m.KernelVersion
	}
	if min == "" {
		return false, fmt.Sprintf("no OS version allowed for %q", m.GoOS)
	}
	if !atLeast(have, min) {
		return false, fmt.Sprintf("%s version %q below %s", m.GoOS, have, min)
	}
	return true, ""
}

func inRanges(ranges []string, m account.Meta) bool {
	var addrs []netip.Addr
	for _, a := range m.Addresses {
		if p, err := netip.ParsePrefix(a); err == nil {
			addrs = append(addrs, p.Addr())
		} else if ip, err := netip.ParseAddr(a); err == nil {
			addrs = append(addrs, ip)
		}
	}
	if ip, err := netip.ParseAddr(m.ConnectionIP); err == nil {
		addrs = append(addrs, ip)
	}
	for _, r := range ranges {
		p, err := netip.ParsePrefix(r)
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if p.Contains(a.Unmap()) {
				return true
			}
		}
	}
	return false
}

// ProcessPath is a process's path on an OS ("" if none is given).
func ProcessPath(p account.Process, goos string) string {
	switch strings.ToLower(goos) {
	case "linux":
		return p.LinuxPath
	case "darwin":
		return p.MacPath
	case "windows":
		return p.WindowsPath
	}
	return ""
}

func running(files []account.FileState, path string) bool {
	for _, f := range files {
		if f.Path == path && f.ProcessIsRunning {
			return true
		}
	}
	return false
}

// Files lists the paths a peer on goos must report on for the checks.
func Files(cs []account.PostureCheck, goos string) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range cs {
		if c.Checks.Process == nil {
			continue
		}
		for _, p := range c.Checks.Process.Processes {
			if path := ProcessPath(p, goos); path != "" && !seen[path] {
				seen[path] = true
				out = append(out, path)
			}
		}
	}
	return out
}

// parseVersion reads the leading numeric components of a version
// ("v0.77.1-rc1" -> 0,77,1; "6.1.0-18-amd64" -> 6,1,0).
func parseVersion(s string) ([]int, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	var out []int
	for _, part := range strings.Split(s, ".") {
		digits := part
		if i := strings.IndexFunc(part, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
			digits = part[:i]
		}
		if digits == "" {
			break
		}
		n, err := strconv.Atoi(digits)
		if err != nil {
			return nil, false
		}
		out = append(out, n)
		if len(digits) != len(part) {
			break
		}
	}
	return out, len(out) > 0
}

// atLeast compares versions component by component; an unparsable
// version (a development build) fails.
func atLeast(have, min string) bool {
	h, ok1 := parseVersion(have)
	m, ok2 := parseVersion(min)
	if !ok1 || !ok2 {
		return false
	}
	for i := 0; i < max(len(h), len(m)); i++ {
		var a, b int
		if i < len(h) {
			a = h[i]
		}
		if i < len(m) {
			b = m[i]
		}
		if a != b {
			return a > b
		}
	}
	return true
}

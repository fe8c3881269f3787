package forward

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// confV6 is the directory of the per-interface IPv6 sysctls, below the
// proc root.
const confV6 = "sys/net/ipv6/conf"

// target is one sysctl Apply sets: key (below the proc root) to value,
// and when from is set only if it holds from now (else it is an
// administrator's choice and stays).
type target struct {
	key, value, from string
}

// targets lists, in the order they are set, the sysctls routing the
// families needs. Turning on net.ipv6.conf.all.forwarding makes Linux
// ignore router advertisements on every interface whose accept_ra is 1
// (the default), so a host that gets its IPv6 default route by SLAAC
// would lose it when it expires: accept_ra goes to 2 (accept even while
// forwarding) first, on the default template (interfaces that appear
// later) and each interface but loopback and the WireGuard one, as the
// official client does. Interfaces set to 0 or 2 by their administrator
// are left alone.
func (f *Forwarder) targets(v4, v6 bool) []target {
	var out []target
	if v4 {
		out = append(out, target{key: sysctlV4, value: "1"})
	}
	if !v6 {
		return out
	}
	out = append(out, target{key: acceptRAKey("default"), value: "2", from: "1"})
	ents, err := os.ReadDir(filepath.Join(f.o.ProcRoot, confV6))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		f.o.Log.Warn("list interfaces to keep accepting router advertisements", "err", err)
	}
	for _, e := range ents {
		switch n := e.Name(); n {
		case "all", "default", "lo", f.o.Interface:
		default:
			out = append(out, target{key: acceptRAKey(n), value: "2", from: "1"})
		}
	}
	return append(out, target{key: sysctlV6, value: "1"})
}

func acceptRAKey(iface string) string { return confV6 + "/" + iface + "/accept_ra" }

func isAcceptRA(k string) bool {
	return strings.HasPrefix(k, confV6+"/") && strings.HasSuffix(k, "/accept_ra")
}

// ifaceGone reports an error writing k that only says its interface no
// longer exists: nothing is left to set or restore there.
func ifaceGone(k string, err error) bool { return isAcceptRA(k) && errors.Is(err, fs.ErrNotExist) }

// restoreOrder is the order saved sysctls go back in: forwarding first,
// so no interface ignores advertisements between the two.
func restoreOrder(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if ra, rb := isAcceptRA(a), isAcceptRA(b); ra != rb {
			if ra {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	return keys
}

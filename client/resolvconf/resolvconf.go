// Package resolvconf points the host's resolver at the agent's DNS service
// by rewriting resolv.conf, keeping the original beside the agent's state
// so that it comes back on down, and on the next start after a crash.
package resolvconf

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultPath is the system's resolver configuration.
const DefaultPath = "/etc/resolv.conf"

// header starts every resolv.conf the agent writes.
const header = "# Written by the netbird agent (wiremesh)"

// ErrOtherAgent is returned when resolv.conf was written by an agent
// whose saved original is not in this state directory (another agent on
// the same host, or a state directory lost after a crash): taking it over
// would save that version as the host's original.
var ErrOtherAgent = errors.New("was written by a netbird agent whose saved original is not here (another agent on this host, or a state directory lost after a crash); restore it by hand, or run this agent with --disable-dns")

// ErrBadDomain is returned by Apply for a search domain that contains
// whitespace or control characters; nothing is written.
var ErrBadDomain = errors.New("contains whitespace or control characters")

// ErrNotAFile is returned when resolv.conf is a link: another program
// (systemd-resolved, resolvconf, NetworkManager) owns it, and writing
// through the link would change that program's file.
var ErrNotAFile = errors.New("is a symbolic link managed by another program")

// File manages one resolv.conf. Backup is where the original is kept while
// the agent's version is in place; it exists exactly as long as that.
type File struct {
	Path   string
	Backup string
}

// Conf is what the agent reads from a resolv.conf.
type Conf struct {
	Nameservers []netip.Addr
	Search      []string
	Options     []string
}

// Parse reads the parts of a resolv.conf the agent keeps.
func Parse(b []byte) Conf {
	var c Conf
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			// A zone suffix (fe80::1%eth0) is dropped: forwarding
			// goes out of the host's default route anyway.
			if a, err := netip.ParseAddr(f[1]); err == nil {
				c.Nameservers = append(c.Nameservers, a.WithZone(""))
			}
		case "search", "domain":
			c.Search = append(c.Search, f[1:]...)
		case "options":
			c.Options = append(c.Options, f[1:]...)
		}
	}
	return c
}

// Original returns the host's own configuration: the backup when the
// agent's version is in place (also one left by a crash), else the file.
func (f File) Original() ([]byte, error) {
	b, err := os.ReadFile(f.Backup)
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", f.Backup, err)
	}
	if fi, err := os.Lstat(f.Path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(f.Path)
		return nil, fmt.Errorf("%s %w (-> %s); not changing it", f.Path, ErrNotAFile, target)
	}
	b, err = os.ReadFile(f.Path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", f.Path, err)
	}
	return b, nil
}

// Apply makes ns the host's only name server, with search listed before
// the host's own search domains, and returns the host's configuration
// (whose name servers the agent forwards to). The original is saved to
// Backup first, unless a backup is already there.
func (f File) Apply(ns netip.Addr, search []string) (Conf, error) {
	// A second guard behind the resolver's name checks: a search domain
	// with a space, newline or control byte would add its own words or
	// lines ("nameserver ...", "options ...") to the file.
	for _, d := range search {
		if strings.IndexFunc(d, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
			return Conf{}, fmt.Errorf("search domain %q: %w", d, ErrBadDomain)
		}
	}
	orig, err := f.Original()
	if err != nil {
		return Conf{}, err
	}
	if _, err := os.Stat(f.Backup); errors.Is(err, fs.ErrNotExist) {
		if strings.HasPrefix(string(orig), header) {
			return Conf{}, fmt.Errorf("%s %w", f.Path, ErrOtherAgent)
		}
		if err := writeAtomic(f.Backup, orig); err != nil {
			return Conf{}, fmt.Errorf("save the original resolv.conf: %w", err)
		}
	}
	c := Parse(orig)
	c.Nameservers = slices.DeleteFunc(c.Nameservers, func(a netip.Addr) bool { return a == ns })
	var b strings.Builder
	fmt.Fprintf(&b, "%s: peer names resolve at %s.\n", header, ns)
	fmt.Fprintf(&b, "# The original is in %s and comes back on netbird down.\n", f.Backup)
	var all []string
	for _, d := range append(slices.Clone(search), c.Search...) {
		if d != "" && !slices.Contains(all, d) {
			all = append(all, d)
		}
	}
	if len(all) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(all, " "))
	}
	fmt.Fprintf(&b, "nameserver %s\n", ns)
	if len(c.Options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(c.Options, " "))
	}
	if err := writeInPlace(f.Path, []byte(b.String())); err != nil {
		return Conf{}, err
	}
	return c, nil
}

// Restore puts the original back and drops the backup. Without a backup
// there is nothing of the agent's in place, and it does nothing.
func (f File) Restore() (restored bool, err error) {
	b, err := os.ReadFile(f.Backup)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", f.Backup, err)
	}
	if err := writeInPlace(f.Path, b); err != nil {
		return false, err
	}
	if err := os.Remove(f.Backup); err != nil {
		return true, fmt.Errorf("remove %s: %w", f.Backup, err)
	}
	return true, nil
}

// writeInPlace rewrites path's contents without replacing the file: a
// rename cannot replace a bind-mounted resolv.conf (containers, network
// namespaces), and its inode is what other programs watch.
func writeInPlace(path string, b []byte) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = fh.Write(b)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeAtomic writes a file the agent owns: never seen half-written.
func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".resolv.conf-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

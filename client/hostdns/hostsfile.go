package hostdns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"strings"
)

// The hosts-file block is marked by these lines; everything between them
// is the agent's. A begin line ending in hostsEOLMark says the agent also
// added the newline before it (the file did not end with one), so
// removing the block gives back the file byte for byte.
const (
	hostsBegin   = "# BEGIN netbird peers (written by the netbird agent, removed on netbird down)"
	hostsEnd     = "# END netbird peers"
	hostsEOLMark = " [newline added]"
)

// hostsFile is the last resort where no DNS manager can route the mesh's
// domains to the agent: the peers' names in a marked block of the hosts
// file. Custom zones' other records and match domains do not resolve this
// way; status says "hosts file" so the user knows.
type hostsFile struct {
	path string
}

func (h *hostsFile) mode() Mode { return ModeHosts }

// hostsBlock renders the block for c: one line per address, the FQDN
// first, then the short name where the FQDN is in a search domain.
func hostsBlock(c Config) string {
	search := c.searchDomains()
	var b strings.Builder
	b.WriteString(hostsBegin + "\n")
	for _, e := range c.Hosts {
		name := trimDot(e.Name)
		if !e.Addr.IsValid() || !safeName(name) {
			// A newline here could end the block early and leave lines
			// of the map's choosing in the file after the restore.
			continue
		}
		line := e.Addr.String() + " " + name
		for _, d := range search {
			if short, ok := strings.CutSuffix(name, "."+d); ok && short != "" {
				line += " " + short
				break
			}
		}
		b.WriteString(line + "\n")
	}
	b.WriteString(hostsEnd + "\n")
	return b.String()
}

// stripHostsBlock returns content without the agent's block (and the
// newline the agent added before it).
func stripHostsBlock(content []byte) ([]byte, bool, error) {
	s := string(content)
	i := strings.Index(s, hostsBegin)
	if i < 0 {
		return content, false, nil
	}
	if i > 0 && s[i-1] != '\n' {
		return nil, false, fmt.Errorf("the netbird block does not start a line")
	}
	rest := s[i:]
	j := strings.Index(rest, "\n"+hostsEnd+"\n")
	if j < 0 {
		return nil, false, fmt.Errorf("the netbird block has no end line %q; fix the file by hand", hostsEnd)
	}
	beginLine, _, _ := strings.Cut(rest, "\n")
	end := i + j + len("\n"+hostsEnd+"\n")
	start := i
	if strings.HasSuffix(beginLine, hostsEOLMark) && start > 0 {
		start-- // the newline the agent added
	}
	return []byte(s[:start] + s[end:]), true, nil
}

func (h *hostsFile) apply(_ context.Context, c Config) error {
	orig, err := os.ReadFile(h.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", h.path, err)
	}
	base, _, err := stripHostsBlock(orig)
	if err != nil {
		return fmt.Errorf("%s: %w", h.path, err)
	}
	block := hostsBlock(c)
	var out bytes.Buffer
	out.Write(base)
	if len(base) > 0 && base[len(base)-1] != '\n' {
		out.WriteByte('\n')
		block = strings.Replace(block, hostsBegin, hostsBegin+hostsEOLMark, 1)
	}
	out.WriteString(block)
	return writeInPlace(h.path, out.Bytes())
}

func (h *hostsFile) restore(context.Context) error {
	b, err := os.ReadFile(h.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", h.path, err)
	}
	base, found, err := stripHostsBlock(b)
	if err != nil {
		return fmt.Errorf("%s: %w", h.path, err)
	}
	if !found {
		return nil
	}
	return writeInPlace(h.path, base)
}

// upstreams: the host keeps its own resolver for everything.
func (h *hostsFile) upstreams(context.Context) []netip.AddrPort { return nil }

// writeInPlace rewrites path without replacing the inode: /etc/hosts is
// often bind-mounted (containers), where a rename fails.
func writeInPlace(path string, b []byte) error {
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
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

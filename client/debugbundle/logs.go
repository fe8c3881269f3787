package debugbundle

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// logs adds the daemon's log and its rotated siblings, newest first, as
// daemon.log, daemon.log.1, ... each keeping its newest lines when the
// cap cuts it.
func (b *builder) logs(ctx context.Context) {
	if b.src.LogFile == "" {
		return
	}
	paths, err := LogFiles(b.src.LogFile, b.o.LogFileCount)
	if err != nil {
		b.note("daemon log: %v", err)
		return
	}
	for i, p := range paths {
		if ctx.Err() != nil {
			return
		}
		name := "daemon.log"
		if i > 0 {
			name = fmt.Sprintf("daemon.log.%d", i)
		}
		if b.left <= 0 {
			b.truncated = true
			b.note("%s (%s): left out, the size cap was reached", name, filepath.Base(p))
			continue
		}
		data, total, err := readTail(p, b.left)
		if err != nil {
			b.note("%s (%s): %v", name, filepath.Base(p), err)
			continue
		}
		if total > int64(len(data)) {
			b.truncated = true
			b.note("%s (%s): kept the newest %d of %d bytes (size cap %d bytes)", name, filepath.Base(p), len(data), total, b.o.MaxInput)
		} else {
			b.note("%s is %s", name, filepath.Base(p))
		}
		b.add(name, data)
	}
}

// LogFiles returns the log at path and its rotated siblings (by logrotate:
// LOG.1, LOG.2.gz; by a rotating writer: NAME-TIME.EXT[.gz]), newest
// first, at most count of them.
func LogFiles(path string, count int) ([]string, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	dir, base := filepath.Split(path)
	stem := strings.TrimSuffix(base, filepath.Ext(base))
	entries, err := os.ReadDir(filepath.Clean(dir + "."))
	if err != nil {
		return nil, fmt.Errorf("list log directory: %w", err)
	}
	type rotated struct {
		path string
		mod  time.Time
	}
	var rs []rotated
	for _, e := range entries {
		n := e.Name()
		if n == base || !e.Type().IsRegular() || !(strings.HasPrefix(n, base+".") || strings.HasPrefix(n, stem+"-")) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		rs = append(rs, rotated{filepath.Join(dir, n), info.ModTime()})
	}
	sort.SliceStable(rs, func(i, j int) bool {
		if !rs[i].mod.Equal(rs[j].mod) {
			return rs[i].mod.After(rs[j].mod)
		}
		return rs[i].path < rs[j].path
	})
	out := []string{path}
	for _, r := range rs {
		if len(out) >= count {
			break
		}
		out = append(out, r.path)
	}
	return out, nil
}

// readTail returns the last n bytes of the file at path (decompressed if
// it ends in .gz), from a line start, and the file's full size.
func readTail(path string, n int64) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if !strings.HasSuffix(path, ".gz") {
		info, err := f.Stat()
		if err != nil {
			return nil, 0, err
		}
		size := info.Size()
		if size > n {
			if _, err := f.Seek(size-n, io.SeekStart); err != nil {
				return nil, 0, err
			}
		}
		data, err := io.ReadAll(io.LimitReader(f, n))
		if err != nil {
			return nil, 0, err
		}
		if size > n {
			data = keepTail(data, int64(len(data))-1) // from the next line start
		}
		return data, size, nil
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, 0, fmt.Errorf("decompress: %w", err)
	}
	defer zr.Close()
	return tailReader(zr, n)
}

// tailReader keeps the last n bytes of r (from a line start when cut)
// and counts all of them.
func tailReader(r io.Reader, n int64) ([]byte, int64, error) {
	var buf []byte
	var total int64
	chunk := make([]byte, 64<<10)
	for {
		k, err := r.Read(chunk)
		total += int64(k)
		buf = append(buf, chunk[:k]...)
		if int64(len(buf)) > 2*n+int64(len(chunk)) {
			buf = append(buf[:0], buf[int64(len(buf))-n:]...)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, total, fmt.Errorf("decompress: %w", err)
		}
	}
	if int64(len(buf)) > n || total > int64(len(buf)) {
		buf = keepTail(buf, min(n, int64(len(buf))-1))
	}
	return buf, total, nil
}

// defaultCommands are the network-state commands of this platform.
func defaultCommands() map[string][]string {
	switch runtime.GOOS {
	case "linux":
		return map[string][]string{
			"ip-addr.txt": {"ip", "addr"}, "ip-route.txt": {"ip", "route"},
			"ip6-route.txt": {"ip", "-6", "route"}, "ip-rule.txt": {"ip", "rule"},
		}
	case "darwin", "freebsd", "openbsd", "netbsd":
		return map[string][]string{"ifconfig.txt": {"ifconfig", "-a"}, "netstat-route.txt": {"netstat", "-rn"}}
	case "windows":
		return map[string][]string{"ipconfig.txt": {"ipconfig", "/all"}, "route.txt": {"route", "print"}}
	}
	return nil
}

// network adds the output of the network-state commands.
func (b *builder) network(ctx context.Context) {
	cmds := b.src.Commands
	if cmds == nil {
		cmds = defaultCommands()
	}
	for _, name := range sortedNames(cmds) {
		argv := cmds[name]
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var out bytes.Buffer
		c := exec.CommandContext(cctx, argv[0], argv[1:]...)
		c.Stdout, c.Stderr = &out, &out
		err := c.Run()
		cancel()
		if err != nil {
			b.note("%s: %s: %v", name, strings.Join(argv, " "), err)
			if out.Len() == 0 {
				continue
			}
		}
		b.add(name, out.Bytes())
	}
}

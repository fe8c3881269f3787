package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/client/state"
	"github.com/wiremesh/wiremesh/internal/version"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// debugCmd is `netbird debug bundle`: an archive for bug reports with the
// daemon's status, the profile with its secrets removed, the daemon log (if
// it logs to a file) and the host's interfaces and routes.
func debugCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "debug", Short: "Collect information for bug reports"}
	var out, logFile string
	bundle := &cobra.Command{Use: "bundle", Short: "Write a .tar.gz with status, redacted config, log and network state", Args: cobra.NoArgs}
	bundle.Flags().StringVarP(&out, "output", "o", "", "archive to write (default: netbird.debug.TIME.tar.gz in the temp directory)")
	bundle.Flags().StringVar(&logFile, "daemon-log", "", "daemon log file to include (default: --log-file when it is a file)")
	bundle.RunE = func(cmd *cobra.Command, _ []string) error {
		if out == "" {
			out = fmt.Sprintf("%s/netbird.debug.%s.tar.gz", os.TempDir(), time.Now().UTC().Format("20060102T150405Z"))
		}
		if logFile == "" && g.logFile != "" && g.logFile != "console" {
			logFile = g.logFile
		}
		files := map[string][]byte{}
		files["version.txt"] = []byte(fmt.Sprintf("netbird %s %s/%s %s\n", version.Version, runtime.GOOS, runtime.GOARCH, runtime.Version()))
		if c, done, err := g.daemon(cmd.Context()); err == nil {
			if r, err := c.Status(cmd.Context(), &daemonpb.StatusRequest{GetFullPeerStatus: true}); err == nil {
				b, _ := json.MarshalIndent(toJSON(r), "", "  ")
				files["status.json"] = b
			} else {
				files["status.json"] = []byte(fmt.Sprintf("status: %v\n", plain(err)))
			}
			done()
		} else {
			files["status.json"] = []byte(fmt.Sprintf("daemon: %v\n", err))
		}
		if cfg, err := state.Load(g.configPath()); err == nil {
			cfg.PrivateKey = "(redacted)"
			b, _ := json.MarshalIndent(cfg, "", "  ")
			files["config.json"] = b
		}
		if logFile != "" {
			if b, err := os.ReadFile(logFile); err == nil {
				const keep = 4 << 20 // the newest 4 MiB
				if len(b) > keep {
					b = b[len(b)-keep:]
				}
				files["daemon.log"] = redact(b)
			}
		}
		if runtime.GOOS == "linux" {
			for name, args := range map[string][]string{"ip-addr.txt": {"addr"}, "ip-route.txt": {"route"}} {
				if b, err := exec.Command("ip", args...).CombinedOutput(); err == nil {
					files[name] = b
				}
			}
		}
		if err := writeTarGz(out, files); err != nil {
			return err
		}
		fmt.Printf("Debug bundle written to %s (private keys and setup keys removed; review it before sharing)\n", out)
		return nil
	}
	cmd.AddCommand(bundle)
	return cmd
}

// redact masks anything in a log that looks like a setup key (a UUID).
func redact(b []byte) []byte {
	s := string(b)
	var out strings.Builder
	for len(s) > 0 {
		i := strings.IndexByte(s, '-')
		if i < 8 || i+28 > len(s) || !isUUID(s[i-8:i+28]) {
			if i < 0 {
				out.WriteString(s)
				break
			}
			out.WriteString(s[:i+1])
			s = s[i+1:]
			continue
		}
		out.WriteString(s[:i-8])
		out.WriteString("(redacted-uuid)")
		s = s[i+28:]
	}
	return []byte(out.String())
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
	}
	return true
}

func writeTarGz(path string, files map[string][]byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	now := time.Now()
	for name, b := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(b)), ModTime: now}); err != nil {
			f.Close()
			return err
		}
		if _, err := tw.Write(b); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/client/debugbundle"
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
	var o debugbundle.Options
	bundle := &cobra.Command{Use: "bundle", Short: "Write a .tar.gz with status, redacted config, log and network state", Args: cobra.NoArgs}
	bundle.Flags().StringVarP(&out, "output", "o", "", "archive to write (default: netbird.debug.TIME.tar.gz in the temp directory)")
	bundle.Flags().StringVar(&logFile, "daemon-log", "", "daemon log file to include (default: --log-file when it is a file)")
	bundle.Flags().BoolVarP(&o.Anonymize, "anonymize", "A", false, "also replace public IP addresses, domain names and e-mail addresses with placeholders")
	bundle.Flags().IntVar(&o.LogFileCount, "log-file-count", 1, fmt.Sprintf("how many log files to include: the log and its rotated siblings, newest first (at most %d)", debugbundle.MaxLogFiles))
	bundle.RunE = func(cmd *cobra.Command, _ []string) error {
		if out == "" {
			out = fmt.Sprintf("%s/netbird.debug.%s.tar.gz", os.TempDir(), time.Now().UTC().Format("20060102T150405Z"))
		}
		if logFile == "" {
			logFile = logFileOf(g)
		}
		src := debugbundle.Source{
			Version: "netbird " + version.String(),
			Status:  func(ctx context.Context) ([]byte, error) { return daemonStatus(ctx, g) },
			Profile: func() (state.Config, error) {
				if _, err := os.Stat(g.configPath()); err != nil { // Load would create it
					return state.Config{}, err
				}
				return state.Load(g.configPath())
			},
			LogFile: logFile,
		}
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		res, err := debugbundle.Build(cmd.Context(), src, o, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(out)
			return err
		}
		what := "private keys, setup keys, tokens and passwords removed"
		if o.Anonymize {
			what += "; public addresses and names anonymized"
		}
		if res.Truncated {
			what += "; the size cap cut some content, see README.txt"
		}
		fmt.Printf("Debug bundle written to %s (%s; review it before sharing)\n", out, what)
		return nil
	}
	cmd.AddCommand(bundle)
	return cmd
}

// daemonStatus is the daemon's full status as `netbird status --json`
// prints it.
func daemonStatus(ctx context.Context, g *globals) ([]byte, error) {
	c, done, err := g.daemon(ctx)
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	defer done()
	r, err := c.Status(ctx, &daemonpb.StatusRequest{GetFullPeerStatus: true})
	if err != nil {
		return nil, plain(err)
	}
	return json.MarshalIndent(toJSON(r), "", "  ")
}

// logFileOf is the log file of --log-file, "" for the console.
func logFileOf(g *globals) string {
	if g.logFile == "console" {
		return ""
	}
	return g.logFile
}

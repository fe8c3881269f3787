// Package debugbundle builds the agent's debug bundle: a .tar.gz with the
// daemon's status, the profile with its secrets removed, the daemon log
// and its rotated siblings, and the host's network state. Secrets (private
// and pre-shared keys, setup keys, tokens, passwords) are always removed;
// anonymizing also replaces public addresses, domain names and e-mail
// addresses with placeholders. Both `netbird debug bundle` and the daemon
// (for a remote bundle the management server asks for) use it; it also
// uploads a bundle to the management server. It does not talk to the
// daemon or to management's gRPC API: callers hand it what to collect.
package debugbundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/wiremesh/wiremesh/client/state"
)

// Limits of a bundle.
const (
	// DefaultMaxInput caps what goes into a bundle, before compression.
	// Management takes uploads of at most 50 MiB: 1 MiB is left for what
	// gzip adds to content that does not compress and for tar headers.
	DefaultMaxInput = 49 << 20
	// MaxCollectFor is the longest timed collection.
	MaxCollectFor = 5 * time.Minute
	// MaxLogFiles caps how many log files (the log and its rotated
	// siblings) a bundle holds.
	MaxLogFiles = 100
	// readmeReserve is kept from the cap for the README, written last.
	readmeReserve = 64 << 10
)

// ErrBadOptions is returned for options out of their range.
var ErrBadOptions = errors.New("debug bundle options")

// Source says where a bundle's parts come from. Every field is optional.
type Source struct {
	// Version is the agent's version line.
	Version string
	// Status returns the daemon's full status as JSON.
	Status func(ctx context.Context) ([]byte, error)
	// Profile returns the profile; its private key never enters the
	// bundle (not in the profile, nor anywhere else).
	Profile func() (state.Config, error)
	// LogFile is the daemon's log file; its rotated siblings
	// (LOG.1, LOG.2.gz, NAME-TIME.log.gz) sit beside it.
	LogFile string
	// Level is the daemon's log level: a timed collection raises it to
	// debug for its duration.
	Level *slog.LevelVar
	// Stacks adds the process's goroutine stacks (useful from the daemon).
	Stacks bool
	// Secrets are more literals that must never appear.
	Secrets []string
	// Commands override the network-state commands (file name -> argv);
	// nil runs the platform's defaults.
	Commands map[string][]string
	Log      *slog.Logger
}

// Options are what the requester chose.
type Options struct {
	// Anonymize replaces public addresses, domain names and e-mail
	// addresses with placeholders.
	Anonymize bool
	// Strict, with Anonymize, also replaces private and overlay addresses
	// and WireGuard public keys.
	Strict bool
	// LogFileCount is how many log files to include, newest first
	// (0 means 1, at most MaxLogFiles).
	LogFileCount int
	// CollectFor, when set, waits that long with debug logging before
	// collecting (at most MaxCollectFor).
	CollectFor time.Duration
	// MaxInput caps the bundle's content (0 means DefaultMaxInput).
	MaxInput int64
}

// Result describes a written bundle.
type Result struct {
	Files     []string // in archive order
	Truncated bool     // the size cap cut or left out something
	Notes     []string // what the README says about the collection
}

// Build collects the bundle and writes it, as .tar.gz, to w.
func Build(ctx context.Context, src Source, o Options, w io.Writer) (Result, error) {
	if err := o.check(); err != nil {
		return Result{}, err
	}
	if o.LogFileCount == 0 {
		o.LogFileCount = 1
	}
	if o.MaxInput == 0 {
		o.MaxInput = DefaultMaxInput
	}
	log := src.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &builder{src: src, o: o, log: log, left: max(o.MaxInput-readmeReserve, 0)}
	b.profile()
	if o.CollectFor > 0 {
		if err := b.collectFor(ctx); err != nil {
			return Result{}, err
		}
	}
	b.add("version.txt", []byte(fmt.Sprintf("%s %s/%s %s\n", src.Version, runtime.GOOS, runtime.GOARCH, runtime.Version())))
	b.status(ctx, "status.json")
	b.addFrom("config.json", b.cfg)
	b.network(ctx)
	if src.Stacks {
		var st bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&st, 2)
		b.add("goroutines.txt", st.Bytes())
	}
	b.logs(ctx)
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("debug bundle: %w", err)
	}
	b.readme()
	if err := writeTarGz(w, b.files); err != nil {
		return Result{}, fmt.Errorf("write debug bundle: %w", err)
	}
	res := Result{Truncated: b.truncated, Notes: b.notes}
	for _, f := range b.files {
		res.Files = append(res.Files, f.name)
	}
	return res, nil
}

func (o Options) check() error {
	switch {
	case o.CollectFor < 0 || o.CollectFor > MaxCollectFor:
		return fmt.Errorf("%w: collection time %s is not within 0..%s", ErrBadOptions, o.CollectFor, MaxCollectFor)
	case o.LogFileCount < 0 || o.LogFileCount > MaxLogFiles:
		return fmt.Errorf("%w: log file count %d is not within 0..%d", ErrBadOptions, o.LogFileCount, MaxLogFiles)
	case o.MaxInput < 0:
		return fmt.Errorf("%w: negative size cap", ErrBadOptions)
	}
	return nil
}

type file struct {
	name string
	data []byte
}

// builder collects the files of one bundle within its size cap.
type builder struct {
	src Source
	o   Options
	log *slog.Logger
	sc  *Scrubber
	cfg []byte // the redacted profile, when there is one

	files     []file
	left      int64 // bytes the cap still allows
	truncated bool
	notes     []string
}

func (b *builder) note(format string, args ...any) {
	b.notes = append(b.notes, fmt.Sprintf(format, args...))
}

// profile loads the profile, learns its secrets and keeps it redacted.
func (b *builder) profile() {
	secrets := append([]string(nil), b.src.Secrets...)
	var names []string
	if h, err := os.Hostname(); err == nil {
		names = append(names, h)
	}
	if b.src.Profile != nil {
		cfg, err := b.src.Profile()
		if err != nil {
			b.note("profile: %v", err)
		} else {
			secrets = append(secrets, cfg.PrivateKey)
			names = append(names, cfg.Hostname)
			cfg.PrivateKey = redacted
			if cfg.SSHKey != "" { // a rotated SSH key (netbird ssh rotate-key)
				secrets = append(secrets, cfg.SSHKey)
				cfg.SSHKey = redacted
			}
			b.cfg, _ = json.MarshalIndent(cfg, "", "  ")
		}
	}
	b.sc = NewScrubber(b.o.Anonymize, secrets...)
	if b.o.Strict {
		b.sc.SetStrict()
	}
	b.sc.AddNames(names...)
}

// collectFor keeps debug logging on for the collection time, with the
// status at its start in the bundle, then restores the level.
func (b *builder) collectFor(ctx context.Context) error {
	b.status(ctx, "status-start.json")
	if lv := b.src.Level; lv != nil {
		old := lv.Level()
		if old > slog.LevelDebug {
			lv.Set(slog.LevelDebug)
			defer lv.Set(old)
		}
		b.note("debug logging was on for the %s of the collection", b.o.CollectFor)
	}
	b.log.Info("collecting a debug bundle", "for", b.o.CollectFor)
	t := time.NewTimer(b.o.CollectFor)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("debug bundle collection cut short: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}

func (b *builder) status(ctx context.Context, name string) {
	if b.src.Status == nil {
		return
	}
	st, err := b.src.Status(ctx)
	if err != nil {
		st, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	b.add(name, st)
}

func (b *builder) addFrom(name string, data []byte) {
	if data != nil {
		b.add(name, data)
	}
}

// add scrubs data and adds it, keeping its end if it exceeds the cap.
func (b *builder) add(name string, data []byte) {
	data = b.sc.Scrub(data)
	size := int64(len(data))
	if size > b.left {
		data = keepTail(data, b.left)
		b.truncated = true
		b.note("%s: kept the last %d of %d bytes (size cap %d bytes)", name, len(data), size, b.o.MaxInput)
	}
	if len(data) == 0 && size > 0 {
		return
	}
	b.left -= int64(len(data))
	b.files = append(b.files, file{name: name, data: data})
}

// keepTail returns the last n bytes of data from a line start.
func keepTail(data []byte, n int64) []byte {
	if int64(len(data)) <= n {
		return data
	}
	data = data[int64(len(data))-n:]
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		data = data[i+1:]
	}
	return data
}

func (b *builder) readme() {
	var r strings.Builder
	r.WriteString("NetBird (wiremesh) debug bundle\n\n")
	fmt.Fprintf(&r, "Created: %s\n", time.Now().UTC().Format(time.RFC3339))
	r.WriteString("Removed everywhere: the WireGuard private key, setup keys and other UUIDs, tokens (JWTs, bearer and access tokens), passwords and secrets in key=value pairs and URLs.\n")
	if b.o.Anonymize {
		r.WriteString("Anonymized: public IP addresses (as 240.0.0.0/4 and 2001:db8::/32 placeholders), domain names (anon-N.domain.invalid), e-mail addresses and the host name; the same value has the same placeholder throughout this bundle. Private and overlay (100.64.0.0/10) addresses are kept.\n")
		if b.o.Strict {
			r.WriteString("Strict: private and overlay addresses and WireGuard public keys are replaced as well.\n")
		}
	}
	fmt.Fprintf(&r, "Log files asked for: %d. Size cap: %d bytes before compression.\n", b.o.LogFileCount, b.o.MaxInput)
	if b.truncated {
		r.WriteString("TRUNCATED: the size cap cut or left out content, see the notes.\n")
	}
	if len(b.notes) > 0 {
		r.WriteString("\nNotes:\n")
		for _, n := range b.notes {
			fmt.Fprintf(&r, "- %s\n", n)
		}
	}
	r.WriteString("\nFiles:\n")
	for _, f := range b.files {
		fmt.Fprintf(&r, "- %s (%d bytes)\n", f.name, len(f.data))
	}
	// The notes name files and errors: scrub them as well.
	b.files = append(b.files, file{name: "README.txt", data: keepTail(b.sc.Scrub([]byte(r.String())), readmeReserve)})
}

func writeTarGz(w io.Writer, files []file) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	now := time.Now()
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o600, Size: int64(len(f.data)), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// sortedNames returns m's keys in order.
func sortedNames(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

package debugbundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/client/state"
)

// readBundle returns the archive's files in order.
func readBundle(t *testing.T, b []byte) ([]string, map[string]string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		files[h.Name] = string(data)
	}
	return names, files
}

func writeFile(t *testing.T, path, data string, mod time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mod, mod); err != nil {
		t.Fatal(err)
	}
}

func writeGz(t *testing.T, path, data string, mod time.Time) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(data))
	_ = zw.Close()
	writeFile(t, path, b.String(), mod)
}

// logDir makes client.log with three rotated siblings of known ages and
// an unrelated file.
func logDir(t *testing.T) string {
	dir := t.TempDir()
	now := time.Now()
	writeFile(t, filepath.Join(dir, "client.log"), "level=INFO msg=current peer=8.8.8.8 setup_key=SECRETKEY1\n", now)
	writeFile(t, filepath.Join(dir, "client.log.1"), "level=INFO msg=rotated-1 endpoint=8.8.8.8:51820\n", now.Add(-time.Hour))
	writeGz(t, filepath.Join(dir, "client.log.2.gz"), "level=INFO msg=rotated-2 token=eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln\n", now.Add(-2*time.Hour))
	writeGz(t, filepath.Join(dir, "client-2026-01-01T00-00-00.log.gz"), "level=INFO msg=rotated-3\n", now.Add(-3*time.Hour))
	writeFile(t, filepath.Join(dir, "other.log"), "not ours\n", now)
	return dir
}

// sshKeyPEM is a rotated SSH key as a profile keeps it (the PKCS #8
// prefix of every ed25519 key, then a seed).
const sshKeyPEM = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIHk8mZ1k2gN3Q0cS6cVb1qkM8cJ0yZ3Vn2J7p0z9dJtQ\n-----END PRIVATE KEY-----\n"

func source(t *testing.T, dir string) Source {
	return Source{
		Version: "netbird test",
		Status: func(context.Context) ([]byte, error) {
			return []byte(`{"management":{"url":"https://mgmt.example.com:443"},"peers":[{"fqdn":"peer.netbird.selfhosted","endpoint":"8.8.8.8:51820","ip":"100.64.0.2"}]}`), nil
		},
		Profile: func() (state.Config, error) {
			return state.Config{PrivateKey: privKey, ManagementURL: "https://mgmt.example.com:443", Hostname: "myhost", SSHKey: sshKeyPEM}, nil
		},
		LogFile:  filepath.Join(dir, "client.log"),
		Commands: map[string][]string{"ip-addr.txt": {"echo", "inet 8.8.8.8/32 and key " + privKey}},
	}
}

func TestBuildContents(t *testing.T) {
	dir := logDir(t)
	var out bytes.Buffer
	res, err := Build(context.Background(), source(t, dir), Options{Anonymize: true, LogFileCount: 3}, &out)
	if err != nil {
		t.Fatal(err)
	}
	names, files := readBundle(t, out.Bytes())
	want := []string{"version.txt", "status.json", "config.json", "ip-addr.txt", "daemon.log", "daemon.log.1", "daemon.log.2", "README.txt"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("files (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, res.Files); diff != "" {
		t.Fatalf("result files (-want +got):\n%s", diff)
	}
	all := strings.Join(func() []string {
		var v []string
		for _, s := range files {
			v = append(v, s)
		}
		return v
	}(), "\n")
	for _, leak := range []string{privKey, "SECRETKEY1", "eyJhbGciOiJSUzI1NiJ9", "8.8.8.8", "mgmt.example.com", "peer.netbird.selfhosted", "myhost"} {
		if strings.Contains(all, leak) {
			t.Errorf("bundle holds %q", leak)
		}
	}
	// Newest first; the fourth file is beyond the count; other.log is not a sibling.
	for name, want := range map[string]string{"daemon.log": "msg=current", "daemon.log.1": "msg=rotated-1", "daemon.log.2": "msg=rotated-2"} {
		if !strings.Contains(files[name], want) {
			t.Errorf("%s = %q, want it to hold %q", name, files[name], want)
		}
	}
	if strings.Contains(all, "rotated-3") || strings.Contains(all, "not ours") {
		t.Errorf("bundle holds a log beyond the count or not a sibling")
	}
	// One placeholder for one address across files.
	for _, name := range []string{"status.json", "ip-addr.txt", "daemon.log", "daemon.log.1"} {
		if !strings.Contains(files[name], "240.0.0.1") {
			t.Errorf("%s = %q, want the address's placeholder 240.0.0.1", name, files[name])
		}
	}
	if !strings.Contains(files["status.json"], "100.64.0.2") {
		t.Errorf("overlay address anonymized: %s", files["status.json"])
	}
	if !strings.Contains(files["config.json"], `"private_key": "(redacted)"`) || !strings.Contains(files["config.json"], "anon-1.domain.invalid") ||
		!strings.Contains(files["config.json"], `"ssh_key": "(redacted)"`) || strings.Contains(files["config.json"], "MC4CAQAwBQYDK2VwBCIEI") {
		t.Errorf("config.json = %s", files["config.json"])
	}
	if !strings.Contains(files["README.txt"], "Anonymized") || res.Truncated {
		t.Errorf("README.txt = %s, truncated %v", files["README.txt"], res.Truncated)
	}
}

func TestBuildWithoutAnonymizeKeepsAddresses(t *testing.T) {
	var out bytes.Buffer
	if _, err := Build(context.Background(), source(t, logDir(t)), Options{}, &out); err != nil {
		t.Fatal(err)
	}
	names, files := readBundle(t, out.Bytes())
	if strings.Contains(strings.Join(names, " "), "daemon.log.1") {
		t.Errorf("log file count 0 must mean 1, got %v", names)
	}
	if !strings.Contains(files["daemon.log"], "peer=8.8.8.8") || !strings.Contains(files["daemon.log"], "setup_key=(redacted)") {
		t.Errorf("daemon.log = %q", files["daemon.log"])
	}
	if strings.Contains(files["ip-addr.txt"], privKey) {
		t.Errorf("private key in command output")
	}
}

func TestBuildSizeCap(t *testing.T) {
	dir := t.TempDir()
	var big strings.Builder
	for i := 0; big.Len() < 300<<10; i++ {
		big.WriteString("level=DEBUG msg=\"line ")
		big.WriteString(strings.Repeat("x", 60))
		big.WriteString("\"\n")
	}
	big.WriteString("level=INFO msg=the-newest-line\n")
	now := time.Now()
	writeFile(t, filepath.Join(dir, "client.log"), big.String(), now)
	writeFile(t, filepath.Join(dir, "client.log.1"), strings.Repeat("older line\n", 1000), now.Add(-time.Minute))
	src := Source{LogFile: filepath.Join(dir, "client.log"), Commands: map[string][]string{}}
	var out bytes.Buffer
	const capBytes = readmeReserve + 100<<10
	res, err := Build(context.Background(), src, Options{LogFileCount: 2, MaxInput: capBytes}, &out)
	if err != nil {
		t.Fatal(err)
	}
	names, files := readBundle(t, out.Bytes())
	var total int
	for _, f := range files {
		total += len(f)
	}
	if total > capBytes {
		t.Errorf("bundle content %d bytes, cap %d", total, capBytes)
	}
	if !res.Truncated || !strings.Contains(files["README.txt"], "TRUNCATED") || !strings.Contains(files["README.txt"], "daemon.log.1 (client.log.1): ") {
		t.Errorf("truncation not noted: %v\n%s", names, files["README.txt"])
	}
	log := files["daemon.log"]
	if !strings.HasSuffix(log, "the-newest-line\n") || !strings.HasPrefix(log, "level=DEBUG") || len(log) > 100<<10 {
		t.Errorf("daemon.log kept %d bytes, starting %.40q and ending %.40q: want the newest lines from a line start", len(log), log, log[max(len(log)-40, 0):])
	}
}

func TestBuildCollectForRaisesLevel(t *testing.T) {
	lv := new(slog.LevelVar)
	lv.Set(slog.LevelWarn)
	var sawDebug atomic.Bool
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if lv.Level() == slog.LevelDebug {
				sawDebug.Store(true)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var out bytes.Buffer
	src := Source{Level: lv, Status: func(context.Context) ([]byte, error) { return []byte("{}"), nil }, Commands: map[string][]string{}}
	_, err := Build(context.Background(), src, Options{CollectFor: 100 * time.Millisecond}, &out)
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if !sawDebug.Load() || lv.Level() != slog.LevelWarn {
		t.Fatalf("level during collection debug=%v, after %v: want debug then warn again", sawDebug.Load(), lv.Level())
	}
	names, _ := readBundle(t, out.Bytes())
	if !strings.Contains(strings.Join(names, " "), "status-start.json") {
		t.Errorf("files %v: want the status at the start", names)
	}

	// Cancelled: an error, and the level is back.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Build(ctx, src, Options{CollectFor: time.Minute}, io.Discard); !errors.Is(err, context.Canceled) || lv.Level() != slog.LevelWarn {
		t.Fatalf("cancelled collection: err %v, level %v", err, lv.Level())
	}
}

func TestBuildRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{{CollectFor: 6 * time.Minute}, {CollectFor: -1}, {LogFileCount: -1}, {LogFileCount: MaxLogFiles + 1}, {MaxInput: -1}} {
		if _, err := Build(context.Background(), Source{}, o, io.Discard); !errors.Is(err, ErrBadOptions) {
			t.Errorf("Build(%+v) = %v, want ErrBadOptions", o, err)
		}
	}
}

func TestLogFiles(t *testing.T) {
	dir := logDir(t)
	got, err := LogFiles(filepath.Join(dir, "client.log"), 10)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i] = filepath.Base(got[i])
	}
	want := []string{"client.log", "client.log.1", "client.log.2.gz", "client-2026-01-01T00-00-00.log.gz"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if _, err := LogFiles(filepath.Join(dir, "absent.log"), 1); err == nil {
		t.Fatal("no error for a missing log")
	}
}

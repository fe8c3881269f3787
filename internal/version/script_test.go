package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestVersionScript runs scripts/version.sh in a scratch git repository
// through a release's life: no tag in reach (the source's Version plus the
// commit, never a bare hash), on the tag, past it, with changes, and
// outside git.
func TestVersionScript(t *testing.T) {
	for _, tool := range []string{"git", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (scripts/deps.sh installs it): %v", tool, err)
		}
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "version.sh"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "internal", "version"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(v string) {
		t.Helper()
		src := "package version\n\nvar Version = \"" + v + "\"\n"
		if err := os.WriteFile(filepath.Join(root, "internal", "version", "version.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	version := func() string { t.Helper(); return run("sh", script, root) }

	write("0.3.0")
	if got := version(); got != "0.3.0" {
		t.Errorf("outside git: %q, want the source's 0.3.0", got)
	}
	run("git", "init", "-q")
	run("git", "add", ".")
	run("git", "commit", "-qm", "one")
	hash := run("git", "rev-parse", "--short", "HEAD")
	if got := version(); got != "0.3.0+g"+hash {
		t.Errorf("no tag: %q, want 0.3.0+g%s", got, hash)
	}
	write("0.3.1")
	if got := version(); got != "0.3.1+g"+hash+".dirty" {
		t.Errorf("no tag, changed: %q, want 0.3.1+g%s.dirty", got, hash)
	}
	write("0.3.0")
	run("git", "tag", "v0.3.0")
	if got := version(); got != "0.3.0" {
		t.Errorf("on the tag: %q, want 0.3.0", got)
	}
	write("0.3.1")
	if got := version(); got != "0.3.0+dirty" {
		t.Errorf("on the tag, changed: %q, want 0.3.0+dirty", got)
	}
	run("git", "commit", "-qam", "two")
	hash = run("git", "rev-parse", "--short", "HEAD")
	if got := version(); got != "0.3.0+1.g"+hash {
		t.Errorf("past the tag: %q, want 0.3.0+1.g%s", got, hash)
	}
	// Every form is a version Wire can carry as build metadata.
	meta := regexp.MustCompile(`^[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*$`)
	for _, v := range []string{version(), "0.3.0+g" + hash + ".dirty"} {
		w := strings.TrimPrefix(func() string { old := Version; Version = v; defer func() { Version = old }(); return Wire() }(), NetBird+"+wiremesh.")
		if !meta.MatchString(w) {
			t.Errorf("Wire() for %q carries %q", v, w)
		}
	}
}

package infrastructure

import (
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestShellcheck runs shellcheck on every *.sh of the repository (outside
// .cache, .git and node_modules). The install.sh the server renders is
// checked by internal/agentinstall.
func TestShellcheck(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Fatalf("shellcheck is needed (scripts/deps.sh installs it): %v", err)
	}
	root := repoRoot(t)
	var scripts []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".cache", ".git", "node_modules", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".sh") {
			scripts = append(scripts, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(scripts) < 5 {
		t.Fatalf("found only %v", scripts)
	}
	for _, s := range scripts {
		rel, _ := filepath.Rel(root, s)
		t.Run(rel, func(t *testing.T) {
			cmd := exec.Command(sc, "-x", filepath.Base(s))
			cmd.Dir = filepath.Dir(s)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("shellcheck %s: %v\n%s", rel, err, out)
			}
		})
	}
}

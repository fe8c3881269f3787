package archtest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/wiremesh/wiremesh"

type pkg struct {
	ImportPath string
	Doc        string
	Imports    []string
	Name       string
}

func packages(t *testing.T) []pkg {
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var ps []pkg
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

func component(path string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	first, _, _ := strings.Cut(rel, "/")
	return first
}

// TestDependencyRules: proto imports nothing of ours; management, signal,
// relay and client never import each other (only cmd/ wires them).
func TestDependencyRules(t *testing.T) {
	isolated := map[string]bool{"management": true, "signal": true, "relay": true, "client": true}
	for _, p := range packages(t) {
		from := component(p.ImportPath)
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to := component(imp)
			switch {
			case from == "proto" && to != "proto":
				t.Errorf("%s imports %s: proto must not depend on our code", p.ImportPath, imp)
			case isolated[from] && isolated[to] && from != to:
				t.Errorf("%s imports %s: %s and %s must not depend on each other", p.ImportPath, imp, from, to)
			case from == "internal" && isolated[to]:
				t.Errorf("%s imports %s: shared helpers must not depend on a component", p.ImportPath, imp)
			}
		}
	}
}

// TestPackageDocs: every hand-written package says what it provides.
func TestPackageDocs(t *testing.T) {
	for _, p := range packages(t) {
		if strings.HasPrefix(component(p.ImportPath), "proto") {
			continue // generated
		}
		if strings.TrimSpace(p.Doc) == "" {
			t.Errorf("package %s has no doc comment", p.ImportPath)
		}
	}
}

package infrastructure

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// stage is one FROM ... of a Dockerfile with its instructions.
type stage struct {
	from  string
	instr []*parser.Node
}

func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	var stages []stage
	for _, n := range res.AST.Children {
		if strings.EqualFold(n.Value, "from") {
			stages = append(stages, stage{from: n.Next.Value})
			continue
		}
		if len(stages) == 0 {
			if strings.EqualFold(n.Value, "arg") {
				continue
			}
			t.Fatalf("%s: %s before FROM", path, n.Original)
		}
		stages[len(stages)-1].instr = append(stages[len(stages)-1].instr, n)
	}
	return stages
}

// TestDockerfiles: every image is multi-stage (the toolchain stays in the
// builder), runs as a non-root user and declares a HEALTHCHECK; the
// server images carry CA certificates (ACME, OIDC, Postgres over TLS).
func TestDockerfiles(t *testing.T) {
	root := repoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "infrastructure_files", "Dockerfile*"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "dashboard", "Dockerfile"))
	for _, file := range files {
		t.Run(strings.TrimPrefix(file, root+"/"), func(t *testing.T) {
			stages := parseDockerfile(t, file)
			if len(stages) < 2 {
				t.Fatalf("%d stage(s), want a multi-stage build", len(stages))
			}
			final := stages[len(stages)-1]
			var user, health, text string
			for _, n := range final.instr {
				text += n.Original + "\n"
				switch strings.ToLower(n.Value) {
				case "user":
					user = n.Next.Value
				case "healthcheck":
					health = n.Original
				}
			}
			if user == "" || user == "root" || user == "0" || strings.HasPrefix(user, "0:") || strings.HasPrefix(user, "root:") {
				t.Errorf("final stage runs as %q, want a non-root USER", user)
			}
			if health == "" || strings.Contains(strings.ToUpper(health), "NONE") {
				t.Errorf("final stage has no HEALTHCHECK")
			}
			if !strings.Contains(final.from, "nginx") && !strings.Contains(text, "ca-certificates") {
				t.Errorf("final stage (%s) installs no ca-certificates", final.from)
			}
		})
	}
	// The all-in-one image embeds the dashboard built in its builder.
	b, err := os.ReadFile(filepath.Join(root, "infrastructure_files", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, "npm run build") || !strings.Contains(s, "-tags dashboard") {
		t.Errorf("infrastructure_files/Dockerfile does not build and embed the dashboard")
	}
}

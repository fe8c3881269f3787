package secretflag_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"

	"github.com/wiremesh/wiremesh/internal/flagconf"
	"github.com/wiremesh/wiremesh/internal/secretflag"
)

// TestConfiguredThroughFlagconf: a secret's older variable names (the env
// given to File, and its _FILE form) keep working when the command reads
// its settings through flagconf, and still beat the config file.
func TestConfiguredThroughFlagconf(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte("from-old-file-var\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("relay-secret: from-config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"config file", map[string]string{"NB_CONFIG": cfg}, "from-config"},
		{"old variable beats the file", map[string]string{"NB_CONFIG": cfg, "NB_RELAY_AUTH_SECRET": "from-old-var"}, "from-old-var"},
		{"old _FILE variable beats the file", map[string]string{"NB_CONFIG": cfg, "NB_RELAY_AUTH_SECRET_FILE": secretFile}, "from-old-file-var"},
		{"new variable", map[string]string{"NB_RELAY_SECRET": "from-new-var"}, "from-new-var"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v) // Resolve reads the process environment too
			}
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			fs.String(flagconf.ConfigFlag, "", "")
			var got string
			fs.StringVar(&got, "relay-secret", "", "")
			s := secretflag.File(fs, "relay-secret", "NB_RELAY_AUTH_SECRET", &got)
			if err := fs.Parse(nil); err != nil {
				t.Fatal(err)
			}
			if err := flagconf.Apply(fs, os.LookupEnv); err != nil {
				t.Fatal(err)
			}
			if err := s.Resolve(); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("secret %q, want %q", got, tc.want)
			}
		})
	}
}

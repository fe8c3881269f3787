package secretflag_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/wiremesh/wiremesh/internal/secretflag"
)

func TestSources(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "secret")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    string
		wantErr string
	}{
		{"flag", []string{"--turn-secret", "from-flag"}, nil, "from-flag", ""},
		{"file", []string{"--turn-secret-file", file}, nil, "from-file", ""},
		{"env", nil, map[string]string{"NB_TEST_SECRET": "from-env"}, "from-env", ""},
		{"env file", nil, map[string]string{"NB_TEST_SECRET_FILE": file}, "from-file", ""},
		{"flag beats env", []string{"--turn-secret", "from-flag"}, map[string]string{"NB_TEST_SECRET": "from-env"}, "from-flag", ""},
		{"both", []string{"--turn-secret", "x", "--turn-secret-file", file}, nil, "", "both given"},
		{"empty file", []string{"--turn-secret-file", empty}, nil, "", "empty"},
		{"missing file", []string{"--turn-secret-file", filepath.Join(dir, "nope")}, nil, "", "no such file"},
		{"none", nil, nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			var got string
			fs.StringVar(&got, "turn-secret", "", "")
			s := secretflag.File(fs, "turn-secret", "NB_TEST_SECRET", &got)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := secretflag.ResolveAll(s)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q %v, want %q", got, err, tc.want)
			}
		})
	}
}

package infrastructure

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// repoRoot is the repository root (the tests run in infrastructure_files).
func repoRoot(t testing.TB) string {
	t.Helper()
	r, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// composeFiles are every compose file of the repository.
func composeFiles(t testing.TB) []string {
	t.Helper()
	root := repoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "infrastructure_files", "docker-compose*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "docker-compose.yml"))
	if len(files) < 2 {
		t.Fatalf("compose files: %v", files)
	}
	return files
}

// sampleEnv writes what getting-started.sh would: a compose.env and, in
// NB_ETC, secrets.env, config.yaml and Caddyfile.
func sampleEnv(t testing.TB) (envFile, etc string) {
	t.Helper()
	etc = t.TempDir()
	for name, body := range map[string]string{
		"secrets.env": "NB_RELAY_AUTH_SECRET=r\nNB_TURN_SECRET=t\nNB_AUTH_SECRET=r\nPOSTGRES_PASSWORD=p\nNB_STORE_ENGINE_POSTGRES_DSN=postgres://netbird:p@127.0.0.1:5432/netbird\n",
		"config.yaml": "public-url: https://vpn.wiremesh.test\n",
		"Caddyfile":   "{$NB_DOMAIN} {\n}\n",
	} {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	envFile = filepath.Join(t.TempDir(), "compose.env")
	if err := os.WriteFile(envFile, []byte("NB_DOMAIN=vpn.wiremesh.test\nNB_ETC="+etc+"\nNB_ACME_EMAIL=\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return envFile, etc
}

// loadCompose loads a compose file as `docker compose --env-file ENV config`
// does (the same loader), without the process environment.
func loadCompose(t testing.TB, file, envFile string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{file},
		cli.WithWorkingDirectory(filepath.Dir(file)),
		cli.WithEnvFiles(envFile), cli.WithDotEnv,
		cli.WithResolvedPaths(true))
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(context.Background())
}

// secretish are environment names whose values must not be in a compose
// file (they come from env_file: secrets.env).
var secretish = regexp.MustCompile(`(?i)(PASSWORD|SECRET|DSN|TOKEN|KEY)`)

func TestComposeFiles(t *testing.T) {
	envFile, etc := sampleEnv(t)
	for _, file := range composeFiles(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			p, err := loadCompose(t, file, envFile)
			if err != nil {
				t.Fatalf("docker compose config: %v", err)
			}
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(slices.Collect(maps.Keys(p.Services)), "postgres") {
				t.Errorf("no postgres service")
			}
			for name, s := range p.Services {
				if s.Restart != types.RestartPolicyUnlessStopped && s.Restart != types.RestartPolicyAlways {
					t.Errorf("service %s: restart %q, want unless-stopped", name, s.Restart)
				}
				if s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 || s.HealthCheck.Disable {
					t.Errorf("service %s: no health check", name)
				}
				for _, v := range s.Volumes {
					if v.Type == types.VolumeTypeVolume {
						if _, ok := p.Volumes[v.Source]; !ok {
							t.Errorf("service %s: volume %q is not a declared named volume", name, v.Source)
						}
					}
					if v.Type == types.VolumeTypeBind && !strings.HasPrefix(v.Source, etc) && !strings.HasPrefix(v.Source, repoRoot(t)) {
						t.Errorf("service %s: bind mount %s outside NB_ETC and the repository", name, v.Source)
					}
				}
				for _, ef := range s.EnvFiles {
					if ef.Path != filepath.Join(etc, "secrets.env") {
						t.Errorf("service %s: env_file %s, want NB_ETC/secrets.env", name, ef.Path)
					}
				}
				if s.Build != nil {
					if _, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile)); err != nil {
						t.Errorf("service %s: Dockerfile: %v", name, err)
					}
				}
			}
			// No secret value in the file itself: names that look secret
			// appear only as references, never as `NAME: value`.
			for i, line := range strings.Split(string(raw), "\n") {
				k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
				if ok && secretish.MatchString(k) && !strings.HasPrefix(k, "#") && strings.TrimSpace(v) != "" {
					t.Errorf("%s:%d: secret-looking setting in the file: %s", filepath.Base(file), i+1, line)
				}
			}
			// The secrets reach the services through env_file.
			if srv, ok := p.Services["netbird-server"]; ok {
				if got := srv.Environment["NB_RELAY_AUTH_SECRET"]; got == nil || *got != "r" {
					t.Errorf("server: NB_RELAY_AUTH_SECRET from secrets.env = %v", got)
				}
			}
		})
	}
}

// TestComposeNeedsDomain: without NB_DOMAIN (or NB_ETC) the file refuses
// to load, naming the variable, instead of starting with an empty name.
func TestComposeNeedsDomain(t *testing.T) {
	_, etc := sampleEnv(t)
	for _, file := range composeFiles(t) {
		for _, tc := range []struct{ env, want string }{
			{env: "NB_ETC=" + etc + "\n", want: "NB_DOMAIN"},
			{env: "NB_DOMAIN=vpn.wiremesh.test\n", want: "NB_ETC"},
		} {
			envFile := filepath.Join(t.TempDir(), "compose.env")
			if err := os.WriteFile(envFile, []byte(tc.env), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := loadCompose(t, file, envFile)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s without %s: got %v, want an error naming it", filepath.Base(file), tc.want, err)
			}
		}
	}
}

package main_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/proctest"
)

func freeTCPPort(t *testing.T) int {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestConfigFileAndEnv: the real server takes every setting from a config
// file (named by --config or NB_CONFIG) or from NB_* variables alone, and
// listens where it was told; a setting that does not parse, an unknown key
// and a secret in a file others can read stop it with the setting's name.
func TestConfigFileAndEnv(t *testing.T) {
	writeFile := func(t *testing.T, body string, mode os.FileMode) string {
		p := filepath.Join(t.TempDir(), "netbird-server.yaml")
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// serves checks that the server answers where it was told to listen.
	serves := func(t *testing.T, srv *proctest.Proc, port int) {
		addr := srv.Wait(t, listening, 20*time.Second)[1]
		if want := "127.0.0.1:" + strconv.Itoa(port); addr != want {
			t.Fatalf("listening on %s, want %s\n%s", addr, want, srv.Output())
		}
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("healthz: %s", resp.Status)
		}
	}
	settings := func(port int, dir string) string {
		return "datadir: " + dir + "\nlisten: 127.0.0.1:" + strconv.Itoa(port) + "\npublic-address: 127.0.0.1\nstun-port: 0\n" +
			"turn-secret: from-the-config-file\ntrusted-proxies: [127.0.0.1, ::1]\nlog-level: debug\n"
	}

	t.Run("config flag only", func(t *testing.T) {
		port := freeTCPPort(t)
		cfg := writeFile(t, settings(port, t.TempDir()), 0o600)
		serves(t, proctest.Start(t, nil, "netbird-server", "--config", cfg), port)
	})
	t.Run("NB_CONFIG only", func(t *testing.T) {
		port := freeTCPPort(t)
		cfg := writeFile(t, settings(port, t.TempDir()), 0o600)
		serves(t, proctest.Start(t, []string{"NB_CONFIG=" + cfg}, "netbird-server"), port)
	})
	t.Run("env only", func(t *testing.T) {
		port := freeTCPPort(t)
		srv := proctest.Start(t, []string{"NB_DATADIR=" + t.TempDir(), "NB_LISTEN=127.0.0.1:" + strconv.Itoa(port),
			"NB_PUBLIC_ADDRESS=127.0.0.1", "NB_STUN_PORT=0", "NB_TRUSTED_PROXIES=127.0.0.1,::1"}, "netbird-server")
		serves(t, srv, port)
	})
	t.Run("env over file", func(t *testing.T) {
		port, other := freeTCPPort(t), freeTCPPort(t)
		cfg := writeFile(t, settings(other, t.TempDir()), 0o600)
		serves(t, proctest.Start(t, []string{"NB_CONFIG=" + cfg, "NB_LISTEN=127.0.0.1:" + strconv.Itoa(port)}, "netbird-server"), port)
	})

	refused := []struct {
		name string
		env  []string
		body string
		mode os.FileMode
		want []string
	}{
		{name: "env does not parse", env: []string{"NB_STUN_PORT=three"}, want: []string{"NB_STUN_PORT", "--stun-port"}},
		{name: "unknown key", body: "listen: 127.0.0.1:0\nstun_port: 0\n", mode: 0o600, want: []string{`unknown key "stun_port"`, `did you mean "stun-port"`}},
		{name: "value does not parse", body: "stun-port: three\n", mode: 0o600, want: []string{"line 1: stun-port", "--stun-port"}},
		{name: "secret readable by others", body: "turn-secret: s3cr3t-value\n", mode: 0o644, want: []string{`holds the secret "turn-secret"`, "chmod 600"}},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			env := append([]string{"NB_DATADIR=" + t.TempDir(), "NB_LISTEN=127.0.0.1:0"}, c.env...)
			if c.body != "" {
				env = append(env, "NB_CONFIG="+writeFile(t, c.body, c.mode))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, proctest.Binary(t, "netbird-server"))
			cmd.Env = append(os.Environ(), env...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("started:\n%s", out)
			}
			for _, w := range c.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output does not say %q:\n%s", w, out)
				}
			}
			if strings.Contains(string(out), "s3cr3t") || regexp.MustCompile(`listening|gRPC\)`).Match(out) {
				t.Errorf("output shows the secret or a started server:\n%s", out)
			}
		})
	}
}

// TestConfigOtherServers: netbird-mgmt, netbird-signal and netbird-relay
// read the same environment and config file, and the older variable
// names (NB_RELAY_AUTH_SECRET) still count.
func TestConfigOtherServers(t *testing.T) {
	write := func(t *testing.T, body string) string {
		p := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		bin  string
		env  func(t *testing.T, port int) []string
		want string
	}{
		{bin: "netbird-relay", env: func(t *testing.T, port int) []string {
			// The secret it needs to start is only in the file.
			return []string{"NB_CONFIG=" + write(t, "listen-address: 127.0.0.1:"+strconv.Itoa(port)+"\nexposed-address: rel://127.0.0.1:"+strconv.Itoa(port)+"\nauth-secret: relay-secret-in-a-file\n")}
		}},
		{bin: "netbird-signal", env: func(t *testing.T, port int) []string {
			return []string{"NB_LISTEN=127.0.0.1:" + strconv.Itoa(port)}
		}},
		{bin: "netbird-mgmt", env: func(t *testing.T, port int) []string {
			// --relay needs --relay-secret: given by its older name.
			return []string{"NB_CONFIG=" + write(t, "datadir: "+t.TempDir()+"\nlisten: 127.0.0.1:"+strconv.Itoa(port)+"\nsignal: 127.0.0.1:10000\nrelay: [rels://relay.example.com:443]\n"),
				"NB_RELAY_AUTH_SECRET=old-name-secret"}
		}},
	}
	for _, c := range cases {
		t.Run(c.bin, func(t *testing.T) {
			port := freeTCPPort(t)
			srv := proctest.Start(t, c.env(t, port), c.bin)
			if addr := srv.Wait(t, listening, 20*time.Second)[1]; addr != "127.0.0.1:"+strconv.Itoa(port) {
				t.Fatalf("listening on %s, want port %d\n%s", addr, port, srv.Output())
			}
			for _, secret := range []string{"relay-secret-in-a-file", "old-name-secret"} {
				if strings.Contains(srv.Output(), secret) {
					t.Fatalf("output shows a secret:\n%s", srv.Output())
				}
			}
		})
	}
}

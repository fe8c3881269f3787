package infrastructure

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
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

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/internal/testacme"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// domain resolves to 127.0.0.1 for pebble (its DNS answers so for every
// name); the test's clients dial 127.0.0.1 and present the name.
const domain = "vpn.wiremesh.test"

// runScript runs getting-started.sh with env (and no terminal, so it never
// prompts) and returns its output.
func runScript(t *testing.T, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(repoRoot(t), "infrastructure_files", "getting-started.sh"))
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	cmd.Stdin = nil
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// readEnv parses a KEY=VALUE file (comments and blank lines skipped).
func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not KEY=VALUE: %q", path, line)
		}
		m[k] = v
	}
	return m
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var hexSecret = regexp.MustCompile(`^[0-9a-f]{48}$`)

// checkSecrets: secrets.env is 0600 and holds generated secrets.
func checkSecrets(t *testing.T, path string, keys ...string) map[string]string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want 0600", path, fi.Mode().Perm())
	}
	env := readEnv(t, path)
	for _, k := range keys {
		if !hexSecret.MatchString(env[k]) {
			t.Errorf("%s: %s=%q, want a generated secret", path, k, env[k])
		}
	}
	return env
}

// TestGettingStartedBinary renders a binary install for a sample domain,
// checks the config, unit and secrets, reruns the script (same secrets),
// then starts the installed server with exactly the rendered config and
// secrets against a real ACME CA (pebble): the certificate is issued and
// a peer logs in over https with the domain, getting https/rels:// URLs.
func TestGettingStartedBinary(t *testing.T) {
	ca := testacme.Start(t, testacme.Options{})
	prefix := t.TempDir()
	env := []string{
		"NB_DOMAIN=VPN.wiremesh.test", "NB_ACME_EMAIL=ops@wiremesh.test", "NB_MODE=binary", "NB_INIT=none",
		"NB_PREFIX=" + prefix, "NB_BINARY=" + proctest.Binary(t, "netbird-server"),
		"NB_ACME_DIRECTORY=" + ca.Directory, "NB_ACME_CA_FILE=" + ca.CAFile,
		"NB_LISTEN=127.0.0.1:" + strconv.Itoa(ca.TLSPort), "NB_ACME_HTTP_LISTEN=127.0.0.1:" + strconv.Itoa(ca.HTTPPort), "NB_STUN_PORT=0",
	}
	out, err := runScript(t, env...)
	if err != nil {
		t.Fatalf("getting-started.sh: %v\n%s", err, out)
	}
	etc := filepath.Join(prefix, "etc", "wiremesh")
	bin := filepath.Join(prefix, "usr", "local", "bin", "netbird-server")
	config := filepath.Join(etc, "config.yaml")
	if want := bin + " --config " + config; !strings.Contains(out, want) {
		t.Errorf("output does not print the start command %q:\n%s", want, out)
	}
	cfg := mustRead(t, config)
	for _, want := range []string{
		`domain: "` + domain + `"`, `acme-email: "ops@wiremesh.test"`, `acme-directory: "` + ca.Directory + `"`,
		`acme-ca-file: "` + ca.CAFile + `"`, `listen: "127.0.0.1:` + strconv.Itoa(ca.TLSPort) + `"`,
		`datadir: "` + prefix + `/var/lib/netbird-server"`, `owner-email: "admin@` + domain + `"`,
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config.yaml lacks %q:\n%s", want, cfg)
		}
	}
	unit := mustRead(t, filepath.Join(prefix, "etc", "systemd", "system", "netbird-server.service"))
	for _, want := range []string{"ExecStart=" + bin + " --config " + config, "EnvironmentFile=" + etc + "/secrets.env", "Restart=on-failure", "AmbientCapabilities=CAP_NET_BIND_SERVICE"} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q:\n%s", want, unit)
		}
	}
	secrets := checkSecrets(t, filepath.Join(etc, "secrets.env"), "NB_RELAY_AUTH_SECRET", "NB_TURN_SECRET", "POSTGRES_PASSWORD")

	// A rerun (an upgrade) keeps the secrets and writes the same config.
	if out, err := runScript(t, env...); err != nil {
		t.Fatalf("getting-started.sh again: %v\n%s", err, out)
	}
	if again := readEnv(t, filepath.Join(etc, "secrets.env")); again["NB_RELAY_AUTH_SECRET"] != secrets["NB_RELAY_AUTH_SECRET"] ||
		again["NB_TURN_SECRET"] != secrets["NB_TURN_SECRET"] || again["POSTGRES_PASSWORD"] != secrets["POSTGRES_PASSWORD"] {
		t.Errorf("rerun changed the secrets: %v, was %v", again, secrets)
	}
	if again := mustRead(t, config); again != cfg {
		t.Errorf("rerun changed the config:\n%s\nwas:\n%s", again, cfg)
	}

	// Start it as the unit would: the secrets as environment, the config file.
	var senv []string
	for k, v := range secrets {
		senv = append(senv, k+"="+v)
	}
	srv := proctest.StartCmd(t, exec.Command(bin, "--config", config), senv)
	srv.Wait(t, regexp.MustCompile(`TLS certificate ready`), 90*time.Second)
	srv.Wait(t, regexp.MustCompile(`Owner created: +admin@`+regexp.QuoteMeta(domain)+`, initial password`), 10*time.Second)

	hostPort := net.JoinHostPort(domain, strconv.Itoa(ca.TLSPort))
	tlsConf := &tls.Config{RootCAs: ca.Roots, ServerName: domain}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConf, DialContext: testacme.DialLoopback}}
	defer hc.CloseIdleConnections()
	for path, want := range map[string]string{
		"/healthz":    `"ok"`,
		"/install.sh": "SERVER='https://" + hostPort + "'",
	} {
		resp, err := hc.Get("https://" + hostPort + path)
		if err != nil {
			t.Fatalf("GET %s over https: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("GET %s: %s, want 200 with %q:\n%s", path, resp.Status, want, body)
		}
	}

	// A peer joins over https with the domain name.
	keyOut, err := proctest.Run(t, "netbird-server", "admin", "--datadir", filepath.Join(prefix, "var", "lib", "netbird-server"), "setup-keys", "create", "--reusable")
	if err != nil {
		t.Fatalf("admin setup-keys create: %v\n%s", err, keyOut)
	}
	lines := strings.Split(strings.TrimSpace(keyOut), "\n")
	conn, err := grpc.NewClient("passthrough:///"+hostPort, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return testacme.DialLoopback(ctx, "tcp", addr)
	}), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Roots})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lr, err := testpeer.New(conn, "gs-peer").Login(ctx, lines[len(lines)-1])
	if err != nil {
		t.Fatalf("login over https: %v", err)
	}
	nc := lr.GetNetbirdConfig()
	if nc.GetSignal().GetProtocol() != mgmtpb.HostConfig_HTTPS || nc.GetSignal().GetUri() != hostPort {
		t.Errorf("signal advertised as %v %q, want HTTPS %s", nc.GetSignal().GetProtocol(), nc.GetSignal().GetUri(), hostPort)
	}
	if urls := nc.GetRelay().GetUrls(); len(urls) != 1 || urls[0] != "rels://"+hostPort {
		t.Errorf("relay URLs %v, want rels://%s", urls, hostPort)
	}
}

// TestGettingStartedCompose renders the compose install and loads the
// repository's docker-compose.yml with exactly the files it wrote.
func TestGettingStartedCompose(t *testing.T) {
	for _, email := range []string{"", "ops@wiremesh.test"} {
		prefix := t.TempDir()
		out, err := runScript(t, "NB_DOMAIN="+domain, "NB_ACME_EMAIL="+email, "NB_MODE=compose", "NB_INIT=none", "NB_PREFIX="+prefix)
		if err != nil {
			t.Fatalf("getting-started.sh: %v\n%s", err, out)
		}
		etc := filepath.Join(prefix, "etc", "wiremesh")
		if !strings.Contains(out, "docker compose --project-directory "+repoRoot(t)) || !strings.Contains(out, "--env-file "+etc+"/compose.env up -d --build") {
			t.Errorf("output lacks the compose command:\n%s", out)
		}
		secrets := checkSecrets(t, filepath.Join(etc, "secrets.env"), "NB_RELAY_AUTH_SECRET", "NB_TURN_SECRET", "POSTGRES_PASSWORD")
		cfg := mustRead(t, filepath.Join(etc, "config.yaml"))
		for _, want := range []string{`public-url: "https://` + domain + `"`, `listen: "127.0.0.1:33073"`, `stun-listen: ":3478"`, "store: postgres"} {
			if !strings.Contains(cfg, want) {
				t.Errorf("config.yaml lacks %q:\n%s", want, cfg)
			}
		}
		if strings.Contains(cfg, secrets["POSTGRES_PASSWORD"]) {
			t.Errorf("config.yaml holds the Postgres password")
		}
		caddy := mustRead(t, filepath.Join(etc, "Caddyfile"))
		if got := strings.Contains(caddy, "email {$NB_ACME_EMAIL}"); got != (email != "") {
			t.Errorf("NB_ACME_EMAIL=%q: Caddyfile email line present=%v:\n%s", email, got, caddy)
		}
		if strings.Contains(caddy, "acme_ca") {
			t.Errorf("Caddyfile keeps acme_ca without NB_ACME_DIRECTORY")
		}
		p, err := loadCompose(t, filepath.Join(repoRoot(t), "docker-compose.yml"), filepath.Join(etc, "compose.env"))
		if err != nil {
			t.Fatalf("docker compose config with the rendered files: %v", err)
		}
		srv := p.Services["netbird-server"]
		dsn := srv.Environment["NB_STORE_ENGINE_POSTGRES_DSN"]
		if dsn == nil || !strings.Contains(*dsn, ":"+secrets["POSTGRES_PASSWORD"]+"@127.0.0.1:5432/netbird") {
			t.Errorf("server's DSN %v does not use the generated password", dsn)
		}
		if pg := p.Services["postgres"].Environment["POSTGRES_PASSWORD"]; pg == nil || *pg != secrets["POSTGRES_PASSWORD"] {
			t.Errorf("postgres password %v, want the generated one", pg)
		}
		if d := p.Services["caddy"].Environment["NB_DOMAIN"]; d == nil || *d != domain {
			t.Errorf("caddy NB_DOMAIN = %v", d)
		}
	}
}

// TestGettingStartedRefuses: bad input stops the script before it writes
// anything, with a message naming the setting.
func TestGettingStartedRefuses(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{env: nil, want: "set NB_DOMAIN"},
		{env: []string{"NB_DOMAIN=10.0.0.1"}, want: "NB_DOMAIN=10.0.0.1 is not a DNS name"},
		{env: []string{"NB_DOMAIN=vpn.example.com;rm"}, want: "is not a DNS name"},
		{env: []string{"NB_DOMAIN=vpn.example.com", "NB_MODE=kubernetes"}, want: "NB_MODE=kubernetes: want binary or compose"},
		{env: []string{"NB_DOMAIN=vpn.example.com", "NB_ACME_EMAIL=not an address"}, want: "NB_ACME_EMAIL"},
		{env: []string{"NB_DOMAIN=vpn.example.com", "NB_ACME_DIRECTORY=http://plain"}, want: "NB_ACME_DIRECTORY"},
		{env: []string{"NB_DOMAIN=vpn.example.com", "NB_ACME_CA_FILE=/nonexistent"}, want: "NB_ACME_CA_FILE"},
		{env: []string{"NB_DOMAIN=vpn.example.com", "NB_MODE=binary", "NB_INIT=none", "NB_BINARY=/nonexistent"}, want: "NB_BINARY=/nonexistent"},
		// Settings compose mode cannot honour are refused, not ignored.
		{env: []string{"NB_DOMAIN=vpn.example.com", "NB_MODE=compose", "NB_ACME_CA_FILE=" + filepath.Join(repoRoot(t), "go.mod")}, want: "NB_ACME_CA_FILE is for NB_MODE=binary"},
		{env: []string{"NB_DOMAIN=vpn.example.com", "NB_MODE=compose", "NB_LISTEN=:8443"}, want: "NB_LISTEN is for NB_MODE=binary"},
		{env: []string{"NB_DOMAIN=vpn.example.com", "NB_MODE=compose", "NB_ACME_HTTP_LISTEN="}, want: "NB_ACME_HTTP_LISTEN is for NB_MODE=binary"},
		{env: []string{"NB_DOMAIN=vpn.example.com", "NB_MODE=compose", "NB_POSTGRES_PORT=x"}, want: "NB_POSTGRES_PORT=x"},
	} {
		prefix := t.TempDir()
		out, err := runScript(t, append(tc.env, "NB_PREFIX="+prefix, "NB_INIT=none")...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%v: err %v, output %q, want a failure naming %q", tc.env, err, out, tc.want)
		}
		if _, err := os.Stat(filepath.Join(prefix, "etc")); err == nil {
			t.Errorf("%v: files written despite the refusal", tc.env)
		}
	}
}

// TestGettingStartedPorts: the port check looks at the ports the install
// will use: NB_LISTEN, NB_ACME_HTTP_LISTEN and NB_STUN_PORT in binary mode,
// Postgres' (NB_POSTGRES_PORT) in compose mode.
func TestGettingStartedPorts(t *testing.T) {
	if _, err := exec.LookPath("ss"); err != nil {
		t.Fatalf("ss is needed (iproute2, scripts/deps.sh installs it): %v", err)
	}
	tcp := func() int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln.Addr().(*net.TCPAddr).Port
	}
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	main, acme, stun, pgPort := tcp(), tcp(), udp.LocalAddr().(*net.UDPAddr).Port, tcp()
	for _, tc := range []struct {
		env  []string
		want []string
	}{
		{env: []string{"NB_MODE=binary", "NB_LISTEN=:" + strconv.Itoa(main), "NB_ACME_HTTP_LISTEN=127.0.0.1:" + strconv.Itoa(acme), "NB_STUN_PORT=" + strconv.Itoa(stun)},
			want: []string{strconv.Itoa(main) + "/tcp is in use", strconv.Itoa(acme) + "/tcp is in use", strconv.Itoa(stun) + "/udp is in use"}},
		{env: []string{"NB_MODE=compose", "NB_POSTGRES_PORT=" + strconv.Itoa(pgPort), "NB_STUN_PORT=" + strconv.Itoa(stun)},
			want: []string{strconv.Itoa(pgPort) + "/tcp is in use", strconv.Itoa(stun) + "/udp is in use"}},
	} {
		out, err := runScript(t, append(tc.env, "NB_DOMAIN="+domain, "NB_INIT=none", "NB_PREFIX="+t.TempDir(), "NB_BINARY=/bin/true")...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", tc.env, err, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.env, w, out)
			}
		}
	}
}

// TestGettingStartedOldCompose: over a v0.1.0 compose deployment (service
// `server`, SQLite volume <dir>_netbird-server) the compose install refuses
// with the move instructions instead of starting on an empty Postgres;
// NB_OLD_DEPLOYMENT_MOVED=1 lets it go on. docker (and root) are faked:
// the script only asks docker what exists before it refuses.
func TestGettingStartedOldCompose(t *testing.T) {
	old := strings.ToLower(filepath.Base(repoRoot(t)))
	fake := t.TempDir()
	// docker: `compose version` works, `volume inspect V` finds the
	// volumes in FAKE_VOLUMES, `ps` lists FAKE_CONTAINER; anything else
	// (what an install would do) fails loudly.
	docker := `#!/bin/sh
case "$1 $2" in
"compose version") exit 0 ;;
"volume inspect") case " $FAKE_VOLUMES " in *" $3 "*) exit 0 ;; esac; exit 1 ;;
esac
[ "$1" = ps ] && { [ -z "$FAKE_CONTAINER" ] || echo "$FAKE_CONTAINER"; exit 0; }
echo "fake docker: unexpected $*" >&2
exit 99
`
	for name, body := range map[string]string{"docker": docker, "id": "#!/bin/sh\necho 0\n", "ss": "#!/bin/sh\n"} {
		if err := os.WriteFile(filepath.Join(fake, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := "PATH=" + fake + ":" + os.Getenv("PATH")
	for _, tc := range []struct {
		name       string
		env        []string
		refuse     bool
		wantOutput string
	}{
		{name: "old volume", env: []string{"FAKE_VOLUMES=" + old + "_netbird-server"}, refuse: true, wantOutput: "export --out"},
		{name: "old container", env: []string{"FAKE_CONTAINER=abc123"}, refuse: true, wantOutput: "label=com.docker.compose.project=" + old + " --filter label=com.docker.compose.service=server"},
		{name: "moved", env: []string{"FAKE_VOLUMES=" + old + "_netbird-server", "NB_OLD_DEPLOYMENT_MOVED=1"}, wantOutput: "fake docker: unexpected"},
		{name: "new layout ran before", env: []string{"FAKE_VOLUMES=" + old + "_netbird-server wiremesh_postgres"}, wantOutput: "fake docker: unexpected"},
		{name: "fresh host", wantOutput: "fake docker: unexpected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := t.TempDir()
			cmd := exec.Command("bash", filepath.Join(repoRoot(t), "infrastructure_files", "getting-started.sh"))
			cmd.Env = append([]string{path, "HOME=" + t.TempDir(), "NB_DOMAIN=" + domain, "NB_MODE=compose", "NB_PREFIX=" + prefix}, tc.env...)
			b, err := cmd.CombinedOutput()
			out := string(b)
			if err == nil {
				t.Fatalf("the fake docker cannot install, yet the script succeeded:\n%s", out)
			}
			if !strings.Contains(out, tc.wantOutput) {
				t.Fatalf("output lacks %q:\n%s", tc.wantOutput, out)
			}
			_, statErr := os.Stat(filepath.Join(prefix, "etc", "wiremesh", "secrets.env"))
			if tc.refuse && (statErr == nil || !strings.Contains(out, "v0.1.0 deployment")) {
				t.Fatalf("refusal wrote files or does not explain (%v):\n%s", statErr, out)
			}
		})
	}
}

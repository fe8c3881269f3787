package infrastructure

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/wiremesh/wiremesh/internal/pgtest"
	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestComposeConfigRuns starts the real server with the config.yaml and
// secrets.env getting-started.sh writes for compose, on a real Postgres,
// as the container would run it (only the addresses, the datadir and the
// DSN's host are moved for this machine, through NB_* variables, which win
// over the file): behind Caddy it must advertise https and rels:// on the
// domain's port 443 and serve /install.sh for https://DOMAIN, and the
// image's HEALTHCHECK command must pass with the same environment.
func TestComposeConfigRuns(t *testing.T) {
	pg := pgtest.Start(t)
	prefix := t.TempDir()
	if out, err := runScript(t, "NB_DOMAIN="+domain, "NB_MODE=compose", "NB_INIT=none", "NB_PREFIX="+prefix); err != nil {
		t.Fatalf("getting-started.sh: %v\n%s", err, out)
	}
	etc := filepath.Join(prefix, "etc", "wiremesh")
	secrets := readEnv(t, filepath.Join(etc, "secrets.env"))
	dsn := pg.DSN(pg.NewDatabase(t)) // the compose Postgres is not here
	// Port 0: the kernel picks, the server's banner names it (no port
	// picked here and bound later, which another process may take between).
	env := []string{"NB_LISTEN=127.0.0.1:0", "NB_STUN_PORT=0", "NB_DATADIR=" + t.TempDir(),
		"NB_AGENT_DIR=" + t.TempDir()}
	for k, v := range secrets {
		if k == "NB_STORE_ENGINE_POSTGRES_DSN" {
			v = dsn
		}
		env = append(env, k+"="+v)
	}
	bin := proctest.Binary(t, "netbird-server")
	srv := proctest.StartCmd(t, exec.Command(bin, "--config", filepath.Join(etc, "config.yaml")), env)
	addr := srv.Wait(t, regexp.MustCompile(`management and signal on (127\.0\.0\.1:[0-9]+) `), 60*time.Second)[1]
	srv.Wait(t, regexp.MustCompile(`Owner created: +admin@`+regexp.QuoteMeta(domain)), 60*time.Second)

	hc := exec.Command(bin, "healthcheck", "--url", "http://"+addr+"/healthz")
	hc.Env = env
	if out, err := hc.CombinedOutput(); err != nil {
		t.Fatalf("netbird-server healthcheck with the container's environment: %v\n%s", err, out)
	}

	req, err := http.NewRequest("GET", "http://"+addr+"/install.sh", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = domain // as Caddy forwards it
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "SERVER='https://" + domain + "'"; resp.StatusCode != 200 || !strings.Contains(string(body), want) {
		t.Fatalf("/install.sh behind the proxy: %s, want %q:\n%s", resp.Status, want, body)
	}

	keyOut, err := proctest.Run(t, "netbird-server", "admin", "--store", "postgres", "--store-dsn", dsn, "setup-keys", "create", "--reusable")
	if err != nil {
		t.Fatalf("admin setup-keys create: %v\n%s", err, keyOut)
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lines := strings.Split(strings.TrimSpace(keyOut), "\n")
	lr, err := testpeer.New(conn, "compose-peer").Login(ctx, lines[len(lines)-1])
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	nc := lr.GetNetbirdConfig()
	if nc.GetSignal().GetProtocol() != mgmtpb.HostConfig_HTTPS || nc.GetSignal().GetUri() != domain+":443" {
		t.Errorf("signal advertised as %v %q, want HTTPS %s:443", nc.GetSignal().GetProtocol(), nc.GetSignal().GetUri(), domain)
	}
	if urls := nc.GetRelay().GetUrls(); len(urls) != 1 || urls[0] != "rels://"+domain+":443" {
		t.Errorf("relay URLs %v, want rels://%s:443", urls, domain)
	}
}

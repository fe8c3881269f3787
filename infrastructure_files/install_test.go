package infrastructure

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/agentinstall"
	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/internal/testacme"
)

// TestInstallScriptFromServer: the real netbird-server serves /install.sh
// and a freshly built agent from --agent-dir; the script, run as users do
// (curl | sh), installs it into NB_INSTALL_DIR and the installed binary
// runs. (Checksum refusal and the missing-platform message:
// internal/agentinstall.)
func TestInstallScriptFromServer(t *testing.T) {
	agents := t.TempDir()
	agent, err := os.ReadFile(proctest.Binary(t, "netbird"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(agents, agentinstall.FileName(runtime.GOOS, runtime.GOARCH)), agent, 0o755); err != nil {
		t.Fatal(err)
	}
	port := testacme.FreePort(t)
	proctest.Start(t, nil, "netbird-server", "--datadir", t.TempDir(), "--listen", "127.0.0.1:"+strconv.Itoa(port),
		"--stun-port", "0", "--agent-dir", agents).Wait(t, regexp.MustCompile(`setup-keys create`), 30*time.Second)

	into := filepath.Join(t.TempDir(), "bin")
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command("sh", "-c", `curl -fsSL "$1/install.sh" | sh`, "sh", base)
	cmd.Env = append(os.Environ(), "NB_INSTALL_DIR="+into, "NB_NO_SERVICE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("curl %s/install.sh | sh: %v\n%s", base, err, out)
	}
	if want := "netbird up --management-url " + base; !strings.Contains(string(out), want) {
		t.Errorf("install.sh output lacks %q:\n%s", want, out)
	}
	v, err := exec.Command(filepath.Join(into, "netbird"), "version").CombinedOutput()
	if err != nil || !strings.Contains(string(v), "wiremesh") {
		t.Fatalf("installed netbird version: %v\n%s", err, v)
	}
}

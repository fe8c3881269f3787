package e2e

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
	"github.com/wiremesh/wiremesh/internal/proctest"
)

// requireDashboard skips (fails, with WIREMESH_REQUIRE_DASHBOARD=1 as in
// CI) when what the browser test needs is missing.
func requireDashboard(t *testing.T) {
	t.Helper()
	root := proctest.Root()
	var missing []string
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node (Node.js)")
	}
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		missing = append(missing, chromium+" (apt-get install chromium)")
	}
	if _, err := os.Stat(filepath.Join(root, "dashboard", "node_modules", "playwright-core")); err != nil {
		missing = append(missing, "dashboard/node_modules (cd dashboard && npm ci)")
	}
	if !proctest.DashboardBuilt() {
		missing = append(missing, "dashboard/dist (cd dashboard && npm run build)")
	}
	if len(missing) == 0 {
		return
	}
	msg := "the dashboard test needs " + strings.Join(missing, ", ")
	if os.Getenv("WIREMESH_REQUIRE_DASHBOARD") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// e2eLine is the browser script's verdict.
var e2eLine = regexp.MustCompile(`(?m)^e2e: (\d+) passed, (\d+) failed$`)

// TestDashboard: the all-in-one server, fresh (no owner), serves the
// embedded dashboard at / on its public address; headless Chromium on the
// public segment runs dashboard/e2e/run.mjs, which drives the UI and asks
// this test (lines on its stdout, answers on its stdin; the protocol is in
// run.mjs's header) to join real agents behind home NATs and to ping
// between them. In the UI: the first-run page creates the owner, who logs
// in (code + PKCE), has an expired access token renewed without a reload,
// walks the UI by keyboard, creates a setup key with which agent 1 joins
// and shows online, sees a group another admin makes and deletes through
// the REST API come and go on the open Groups page and agent 1 go offline
// and online on the open Peers page (live event stream; the latencies are
// logged as LATENCY lines, only appearing within 10 s is asserted), turns peer approval on, sees agent 2 join pending and
// unreachable, approves it, disables the default policy (the agents lose
// each other), creates a group and a policy (the ping works again) and
// disables it (it stops), creates a route through agent 1 and a network
// with a resource and agent 1 as its router (the forms validate first; the
// REST API then lists them; agent 1's page lists what it serves), creates
// a nameserver group (a nameserver inside the peers' network is refused
// beside its address), a zone with an A record and saves the DNS settings
// (the REST API then lists each), revokes and deletes the key, invites a user who
// sets a password on the invite page and logs in, and logs out. axe-core
// checks every page in light and dark: no serious or critical violation.
// Screenshots of each page, light and dark, go to dashboard/e2e-screenshots.
func TestDashboard(t *testing.T) {
	requireDashboard(t)
	root := proctest.Root()
	m := &Mesh{t: t, Lab: netlab.New(t), DataDir: t.TempDir(), ServerArgs: []string{"--owner-email", ""}}
	m.StartServer()
	m.Server.Wait(t, regexp.MustCompile(`No owner yet`), 5*time.Second)
	base := "http://" + netlab.PubAddr + ":" + mgmtPort

	shots := filepath.Join(root, "dashboard", "e2e-screenshots")
	cmd := m.Lab.Cmd(m.Lab.NS("pub"), "node", filepath.Join(root, "dashboard", "e2e", "run.mjs"))
	cmd.Dir = filepath.Join(root, "dashboard")
	cmd.Env = append(os.Environ(), "WIREMESH_URL="+base, "WIREMESH_SCREENSHOTS="+shots, "WIREMESH_JOIN_TIMEOUT=120")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the browser's processes too are stopped with it
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr outputLog
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node: %v", err)
	}
	exited := make(chan error, 1)
	var out outputLog
	requests := make(chan string, 8)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			out.add(line)
			if strings.HasPrefix(line, "SETUP_KEY=") || line == "JOIN_AGAIN" || strings.HasPrefix(line, "PING? ") || strings.HasPrefix(line, "AGENT_") {
				requests <- line
			}
			if strings.HasPrefix(line, "LATENCY ") {
				t.Log(line) // the live-update latencies, measured in the browser
			}
		}
	}()
	go func() { <-read; exited <- cmd.Wait() }()
	stop := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	t.Cleanup(stop)
	defer func() {
		if t.Failed() {
			t.Logf("dashboard/e2e/run.mjs output:\n%s\nstderr:\n%s", out.String(), stderr.String())
		}
	}()
	answer := func(line string) {
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Errorf("write %q to run.mjs: %v", line, err)
		}
	}

	d := dashAgents{m: m, base: base, byName: map[string]*Agent{}}
	deadline := time.After(10 * time.Minute)
	for done := false; !done; {
		select {
		case req := <-requests:
			answer(d.serve(t, req))
		case err = <-exited:
			done = true
		case <-deadline:
			stop()
			t.Fatal("run.mjs did not finish within 10 minutes")
		}
	}
	_ = stdin.Close()
	text := out.String()
	verdict := e2eLine.FindAllStringSubmatch(text, -1)
	if err != nil || len(verdict) == 0 || verdict[len(verdict)-1][2] != "0" {
		t.Fatalf("run.mjs: exit %v, verdict %v", err, verdict)
	}
	if n := verdict[len(verdict)-1][1]; n == "0" {
		t.Fatalf("run.mjs passed no check")
	}
	if len(d.byName) != 2 {
		t.Errorf("run.mjs had %d agents joined, want 2", len(d.byName))
	}
	for _, name := range []string{"setup-light.png", "peers-dark.png", "setup-keys-light.png", "policies-dark.png", "invite-light.png"} {
		if st, err := os.Stat(filepath.Join(shots, name)); err != nil || st.Size() == 0 {
			t.Errorf("screenshot %s: %v", name, err)
		}
	}
	t.Logf("%s (screenshots in %s)", verdict[len(verdict)-1][0], shots)
}

// dashAgents answers run.mjs's requests: agents join with the setup key
// made in the UI, and pings between them report whether they reach each
// other.
type dashAgents struct {
	m      *Mesh
	base   string
	key    string
	byName map[string]*Agent
}

// serve handles one request line and returns the answer line.
func (d *dashAgents) serve(t *testing.T, req string) string {
	t.Helper()
	join := func(name string) string {
		a := d.m.Agent(name, netlab.Home)
		if o, err := d.m.UpAt(a, d.base, d.key); err != nil || !strings.Contains(o, "Connected") {
			t.Errorf("netbird up with the key made in the dashboard: %v\n%s", err, o)
			return "JOINED -"
		}
		d.byName[a.Name] = a
		return "JOINED " + a.Name
	}
	switch {
	case strings.HasPrefix(req, "AGENT_DOWN "), strings.HasPrefix(req, "AGENT_UP "):
		verb, name, _ := strings.Cut(strings.TrimPrefix(req, "AGENT_"), " ")
		a := d.byName[name]
		if a == nil {
			t.Errorf("run.mjs: %q names an agent that did not join", req)
			return verb + " " + name + " 0"
		}
		start := time.Now()
		var (
			o   string
			err error
		)
		if verb == "DOWN" {
			o, err = d.m.CLI(a, "down")
		} else {
			o, err = d.m.UpAt(a, d.base, "")
		}
		if err != nil {
			t.Errorf("%s: netbird %s: %v\n%s", name, strings.ToLower(verb), err, o)
			return verb + " " + name + " 0"
		}
		return fmt.Sprintf("%s %s %d", verb, name, start.UnixMilli())
	case strings.HasPrefix(req, "SETUP_KEY="):
		d.key = strings.TrimSpace(strings.TrimPrefix(req, "SETUP_KEY="))
		return join("dash")
	case req == "JOIN_AGAIN":
		return join("dash2")
	default: // PING? <from> <to> reach|noreach
		f := strings.Fields(req)
		if len(f) != 4 {
			t.Errorf("run.mjs: malformed %q", req)
			return "PING - - error"
		}
		from, to := d.byName[f[1]], d.byName[f[2]]
		if from == nil || to == nil {
			t.Errorf("run.mjs: %q names an agent that did not join", req)
			return "PING " + f[1] + " " + f[2] + " error"
		}
		return "PING " + f[1] + " " + f[2] + " " + d.reach(from, IPOf(d.m.Status(to)), f[3] == "reach")
	}
}

// reach pings until the wanted state holds (reach: one reply; noreach:
// three losses in a row, a change of policy taking a moment to reach the
// agents) or 30 s pass, and says what it saw last.
func (d *dashAgents) reach(from *Agent, ip string, want bool) string {
	deadline := time.Now().Add(30 * time.Second)
	lost := 0
	for {
		ok := d.m.Ping(from, ip)
		if ok {
			lost = 0
		} else {
			lost++
		}
		switch {
		case want && ok:
			return "reach"
		case !want && lost >= 3:
			return "noreach"
		case time.Now().After(deadline) && ok:
			return "reach"
		case time.Now().After(deadline):
			return "noreach"
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// outputLog collects a process's lines for the failure log.
type outputLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (o *outputLog) add(line string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintln(&o.b, line)
}

func (o *outputLog) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// Write implements io.Writer (exec's copying goroutine writes stderr).
func (o *outputLog) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

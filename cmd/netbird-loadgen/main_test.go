package main

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/proctest"
)

// TestLoadgenAgainstServer runs the load generator as a process against a
// real netbird-server and checks its report and its clean-up.
func TestLoadgenAgainstServer(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := proctest.Start(t, nil, "netbird-server", "--datadir", dir, "--listen", addr, "--stun-port", "0", "--disable-relay", "--builtin-idp=false")
	srv.Wait(t, regexp.MustCompile(`setup-keys create`), 20*time.Second)
	out, err := proctest.Run(t, "netbird-server", "admin", "--datadir", dir, "setup-keys", "create", "--reusable")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	out, err = proctest.Run(t, "netbird-loadgen", "-m", "http://"+addr, "-k", lines[len(lines)-1], "--peers", "40",
		"--server-pid", fmt.Sprint(srv.Cmd.Process.Pid), "--json")
	if err != nil {
		t.Fatalf("loadgen: %v\n%s", err, out)
	}
	var r Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("report %q: %v", out, err)
	}
	if r.Peers != 40 || r.FanoutReached != 40 || r.LoginPerSecond <= 0 || r.FirstMapSeconds <= 0 || r.FanoutP99Ms < r.FanoutP50Ms ||
		r.BytesPerUpdate <= 0 || r.ServerRSSMB <= 0 || r.ServerCPUSeconds <= 0 {
		t.Fatalf("report %+v", r)
	}
	t.Logf("%+v", r)
	out, _ = proctest.Run(t, "netbird-server", "admin", "--datadir", dir, "peers", "list")
	if n := strings.Count(strings.TrimSpace(out), "\n"); n != 0 {
		t.Fatalf("the load generator left %d peers:\n%s", n, out)
	}

	// Two accounts, peers asking for deltas: the join reaches the 20
	// streams of its account and nothing reaches the other's.
	acc2, err := proctest.Run(t, "netbird-server", "admin", "--datadir", dir, "accounts", "create")
	if err != nil {
		t.Fatalf("%v\n%s", err, acc2)
	}
	out, err = proctest.Run(t, "netbird-server", "admin", "--datadir", dir, "--account", strings.TrimSpace(acc2), "setup-keys", "create", "--reusable")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	l2 := strings.Split(strings.TrimSpace(out), "\n")
	out, err = proctest.Run(t, "netbird-loadgen", "-m", "http://"+addr, "-k", lines[len(lines)-1]+","+l2[len(l2)-1], "--peers", "40", "--deltas", "--json")
	if err != nil {
		t.Fatalf("loadgen over two accounts: %v\n%s", err, out)
	}
	var r2 Result
	if err := json.Unmarshal([]byte(out), &r2); err != nil {
		t.Fatalf("report %q: %v", out, err)
	}
	if r2.Accounts != 2 || r2.FanoutReached != 20 || r2.OtherAccountBytes != 0 || r2.BytesPerUpdate <= 0 || r2.BytesPerUpdate > 1000 {
		t.Fatalf("report over two accounts %+v (a delta per join, nothing to the other account)", r2)
	}
	t.Logf("%+v", r2)
}

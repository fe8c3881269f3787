package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/turncreds"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestSecretsFromFiles: --turn-secret-file keeps the TURN secret out of ps
// and is the secret credentials are made with; a file given beside the flag,
// or a missing one, stops the server with a clear error.
func TestSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "turn-secret")
	const secret = "turn-secret-from-a-file"
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{
		{"--turn-secret", "x", "--turn-secret-file", file},
		{"--relay-secret-file", filepath.Join(dir, "missing")},
	} {
		out, err := proctest.Run(t, "netbird-server", append([]string{"--datadir", t.TempDir(), "--listen", "127.0.0.1:0", "--stun-port", "0"}, bad...)...)
		if err == nil || !strings.Contains(out, "-file") {
			t.Fatalf("%v: %v\n%s", bad, err, out)
		}
	}

	stun := freeUDPPort(t)
	srv := proctest.Start(t, nil, "netbird-server", "--datadir", dir, "--listen", "127.0.0.1:0", "--stun-port", strconv.Itoa(stun),
		"--turn-relay-ip", "127.0.0.1", "--turn-secret-file", file)
	addr := srv.Wait(t, listening, 20*time.Second)[1]
	if strings.Contains(strings.Join(srv.Cmd.Args, " "), secret) {
		t.Fatal("secret on the command line")
	}
	key := createKey(t, "netbird-server", dir, "--reusable")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := testpeer.New(dial(t, addr), "p")
	if _, err := p.Login(ctx, key); err != nil {
		t.Fatal(err)
	}
	s, err := p.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WaitFor(5*time.Second, func(m []*mgmtpb.SyncResponse) bool { return len(m) > 0 }); err != nil {
		t.Fatal(err)
	}
	turns := s.Messages()[0].GetNetbirdConfig().GetTurns()
	if len(turns) == 0 || !turncreds.Valid(secret, turns[0].GetUser(), turns[0].GetPassword(), time.Now()) {
		t.Fatalf("TURN credentials not made with the file's secret: %v", turns)
	}
}

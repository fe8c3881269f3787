package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkg/sftp"

	"github.com/wiremesh/wiremesh/client/sshserver"
)

// TestSFTPServerCommand: `netbird __sftp-server` is left out of the help
// and serves SFTP on its stdin and stdout until the client hangs up.
func TestSFTPServerCommand(t *testing.T) {
	var help bytes.Buffer
	cmd := root()
	cmd.SetOut(&help)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(help.String(), sshserver.SFTPArg) {
		t.Errorf("help lists %s:\n%s", sshserver.SFTPArg, help.String())
	}

	toServer, clientOut := io.Pipe()
	clientIn, fromServer := io.Pipe()
	cmd = root()
	cmd.SetIn(toServer)
	cmd.SetOut(fromServer)
	cmd.SetArgs([]string{sshserver.SFTPArg})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(context.Background()); fromServer.Close() }()

	sc, err := sftp.NewClientPipe(clientIn, clientOut)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "f")
	f, err := sc.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sc.Close() // closes clientOut: the server sees EOF
	if err := <-done; err != nil {
		t.Errorf("server ended with %v", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "hello" {
		t.Errorf("file %q, %v", b, err)
	}

	if got := sftpCommand(slog.New(slog.DiscardHandler)); len(got) != 2 || !filepath.IsAbs(got[0]) || got[1] != sshserver.SFTPArg {
		t.Errorf("sftpCommand = %q", got)
	}
}

package sshserver

import (
	"fmt"
	"io"

	"github.com/pkg/sftp"
)

// SFTPArg is the hidden subcommand of the agent binary that serves SFTP
// on its stdin and stdout (`netbird __sftp-server`). The agent runs as
// root, so the SFTP server is not served in-process: the session starts
// the binary again with this argument, as the session's user, exactly as
// it starts a shell or a command, and the user's own file permissions
// apply, as with OpenSSH's sftp-server.
const SFTPArg = "__sftp-server"

// ServeSFTP serves one SFTP session (pkg/sftp) on in and out until the
// client closes it, relative paths being relative to the process's
// working directory (the user's home, as the session sets it). It is
// what SFTPArg runs; it does no access checks of its own: it must run as
// the user the session logged in as.
func ServeSFTP(in io.Reader, out io.WriteCloser) error {
	srv, err := sftp.NewServer(struct {
		io.Reader
		io.WriteCloser
	}{in, out})
	if err != nil {
		return fmt.Errorf("sftp server: %w", err)
	}
	defer srv.Close()
	if err := srv.Serve(); err != nil && err != io.EOF {
		return fmt.Errorf("sftp server: %w", err)
	}
	return nil
}

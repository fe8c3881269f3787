package main

import (
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/client/sshserver"
)

// sftpServerCmd is the hidden `netbird __sftp-server`: the agent's SSH
// server starts it as the session's user for the sftp subsystem, and it
// serves SFTP (pkg/sftp) on stdin and stdout with that user's
// permissions. Not for people: it is left out of the help.
func sftpServerCmd() *cobra.Command {
	return &cobra.Command{
		Use:    sshserver.SFTPArg,
		Short:  "Serve SFTP on stdin/stdout (started by the SSH server)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return sshserver.ServeSFTP(cmd.InOrStdin(), nopCloser{cmd.OutOrStdout()})
		},
	}
}

// sftpCommand is how the SSH server serves SFTP: this binary again with
// the hidden subcommand. Nil when the binary cannot be named (the server
// then falls back to OpenSSH's sftp-server, where installed).
func sftpCommand(log *slog.Logger) []string {
	exe, err := os.Executable()
	if err != nil {
		log.Warn("SSH server: SFTP falls back to OpenSSH's sftp-server: cannot find the agent's own binary", "err", err)
		return nil
	}
	return []string{exe, sshserver.SFTPArg}
}

// nopCloser lets ServeSFTP end the session without closing the process's
// stdout itself: the process exits right after.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

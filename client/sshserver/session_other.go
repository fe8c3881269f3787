//go:build !unix

package sshserver

import "golang.org/x/crypto/ssh"

// session: shells, commands and SFTP run as a local user through Unix
// credentials and PTYs, which this OS does not have; the client is told so
// (port forwarding, where enabled, still works).
func (c *conn) session(nc ssh.NewChannel) {
	_ = nc.Reject(ssh.Prohibited, "sessions are not supported by the SSH server on this OS")
}

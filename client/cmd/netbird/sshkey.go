package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// sshRotateKeyCmd is `netbird ssh rotate-key`: the daemon replaces this
// peer's SSH key with a new random one (NetBird has no such command; its
// key changes only with a new profile).
func sshRotateKeyCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rotate-key",
		Short: "Replace this peer's SSH key (host key and client key) with a new random one",
		Long: "Makes a new random ed25519 key for this peer's SSH server and for `netbird ssh`, reports it to management " +
			"and keeps it in the profile; the WireGuard key does not change. Every peer's next network map carries the new key: " +
			"SSH servers refuse the old client key and clients refuse a server still presenting the old host key. " +
			"SSH sessions to this peer end. Identity files written by `netbird ssh-config --identity-file` must be written again. " +
			"Needs root and a running daemon connected to (or able to reach) management; if management does not take the key, nothing changes.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, closeConn, err := g.daemon(cmd.Context())
			if err != nil {
				return err
			}
			defer closeConn()
			resp, err := c.RotateSSHKey(cmd.Context(), &daemonpb.RotateSSHKeyRequest{})
			if err != nil {
				return plain(err)
			}
			fmt.Printf("SSH key rotated: %s (was %s)\n", fingerprint(resp.GetSshPubKey()), fingerprint(resp.GetOldSshPubKey()))
			fmt.Println(resp.GetSshPubKey())
			return nil
		},
	}
}

// fingerprint is an authorized_keys line's SHA256 fingerprint.
func fingerprint(authorized string) string {
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(authorized))
	if err != nil {
		return "(unknown)"
	}
	return ssh.FingerprintSHA256(k)
}

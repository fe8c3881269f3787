package sshclient

import "strings"

// The ports a mesh agent's SSH server listens on: tcp/22, and NetBird's
// internal 22022 (where the host's own sshd holds 22). Kept equal to
// sshserver.Port and sshserver.InternalPort (TestMeshServer checks).
const (
	meshPort         = 22
	meshInternalPort = 22022
)

// MeshPort reports whether port is one a mesh agent's SSH server
// listens on. A host key mismatch anywhere else is another server's key,
// not a forgery of the map's.
func MeshPort(port int) bool { return port == meshPort || port == meshInternalPort }

// MeshServer reports whether version, the identification line an SSH
// server sent (RFC 4253 §4.2), is that of a mesh agent's server: ours
// ("SSH-2.0-wiremesh", or "SSH-2.0-NetBird-SSH-Server-wiremesh ..." when
// it takes NetBird's JWT logins) or NetBird's own ("SSH-2.0-NetBird-SSH-
// Server-<version>[ NetBird-JWT-Required]"). Anything else (OpenSSH
// holding port 22, a server on some other port) presents its own host
// key, which is no forgery of the one the map gives.
//
// The line is the server's word: a forger can claim to be OpenSSH to
// stay out of the activity log, but the connection is refused all the
// same; what this avoids is the false alarm for every host whose own
// sshd answers on 22.
func MeshServer(version string) bool {
	soft, ok := strings.CutPrefix(strings.TrimSuffix(version, "\r"), "SSH-2.0-")
	if !ok {
		return false
	}
	soft, _, _ = strings.Cut(soft, " ") // comments follow a space
	return soft == "wiremesh" || strings.HasPrefix(soft, "NetBird-SSH-Server-")
}

// PrintableVersion is version fit for a terminal: control and non-ASCII
// bytes (the server chose them) become '?'.
func PrintableVersion(version string) string {
	b := []byte(strings.TrimSuffix(version, "\r"))
	for i, c := range b {
		if c < 0x20 || c >= 0x7f {
			b[i] = '?'
		}
	}
	return string(b)
}

package state

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// sshKeyPEMType is the PEM block SSHKey holds.
const sshKeyPEMType = "PRIVATE KEY"

// RotatedSSHKey is the profile's rotated SSH key, nil when it never
// rotated (its SSH key is then the one derived from the WireGuard key).
// Load refuses a profile whose ssh_key does not parse, as it refuses a
// bad private_key.
func (c Config) RotatedSSHKey() ed25519.PrivateKey {
	k, _ := parseSSHKey(c.SSHKey)
	return k
}

func parseSSHKey(s string) (ed25519.PrivateKey, error) {
	if s == "" {
		return nil, nil
	}
	b, rest := pem.Decode([]byte(s))
	if b == nil || b.Type != sshKeyPEMType || len(bytes.TrimSpace(rest)) > 0 {
		return nil, errors.New("ssh_key: not a single PEM \"PRIVATE KEY\" block (remove the field to go back to the key derived from private_key)")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("ssh_key: %w", err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("ssh_key: a %T, want an ed25519 key", k)
	}
	return ek, nil
}

// NewSSHKey makes a random ed25519 SSH key, in the form SSHKey keeps and
// the key itself.
func NewSSHKey() (string, ed25519.PrivateKey, error) {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", nil, fmt.Errorf("new SSH key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return "", nil, fmt.Errorf("new SSH key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: sshKeyPEMType, Bytes: der})), k, nil
}

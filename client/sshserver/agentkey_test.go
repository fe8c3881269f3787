package sshserver

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"github.com/wiremesh/wiremesh/internal/key"
)

// TestAgentKey: an agent that never rotated keeps exactly the key
// derived from its WireGuard key (pinned: installs upgrading to a
// version with rotation must present the same host key), and a rotated
// key replaces it everywhere the agent uses it.
func TestAgentKey(t *testing.T) {
	wg, err := key.ParsePrivate("yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=")
	if err != nil {
		t.Fatal(err)
	}
	const derived = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBY4Rc2rECeF6VDGL4GEcR+E1ao3tQVwyfmXN/sJcG0A"
	k, err := AgentKey(wg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := AuthorizedKeyOf(k); got != derived {
		t.Fatalf("derived key %q, want %q", got, derived)
	}
	if got, _ := AuthorizedKey(wg); got != derived {
		t.Fatalf("AuthorizedKey %q, want %q", got, derived)
	}
	_, rotated, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err = AgentKey(wg, rotated)
	if err != nil || !k.Equal(rotated) {
		t.Fatalf("with a rotated key: %v", err)
	}
	s, err := Signer(k)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := AuthorizedKeyOf(k)
	if pk, err := ParsePeerKey([]byte(got)); err != nil || string(pk.Marshal()) != string(s.PublicKey().Marshal()) || got == derived {
		t.Fatalf("rotated key %q does not match its signer (%v)", got, err)
	}
}

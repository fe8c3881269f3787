package envelope_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/testvectors"
)

func mustPriv(t testing.TB, s string) key.Private {
	t.Helper()
	k, err := key.ParsePrivate(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVectors reproduces the sealed bodies of the real implementation.
func TestVectors(t *testing.T) {
	w := testvectors.LoadWire(t)
	n := 0
	for _, v := range w.Vectors {
		if v.BodyHex == "" {
			continue
		}
		n++
		t.Run(v.Name, func(t *testing.T) {
			// sender private, receiver public
			sPriv, sPub, rPriv, rPub := v.ClientPrivate, v.ClientPublic, v.ServerPrivate, v.ServerPublic
			if v.SenderPrivate != "" {
				sPriv, sPub, rPriv, rPub = v.SenderPrivate, v.SenderPublic, v.ReceiverPrivate, v.ReceiverPublic
			}
			senderPriv, receiverPriv := mustPriv(t, sPriv), mustPriv(t, rPriv)
			if senderPriv.Public().String() != sPub || receiverPriv.Public().String() != rPub {
				t.Fatal("public key derivation differs from the vector")
			}
			var nonce [envelope.NonceSize]byte
			copy(nonce[:], mustHex(t, v.NonceHex))
			plain := mustHex(t, v.PlaintextHex)
			body := envelope.NewShared(senderPriv, receiverPriv.Public()).SealWithNonce(plain, nonce)
			if want := mustHex(t, v.BodyHex); !bytes.Equal(body, want) {
				t.Fatalf("sealed body\n got %x\nwant %x", body, want)
			}
			got, err := envelope.Open(body, senderPriv.Public(), receiverPriv)
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("open: %v, %x", err, got)
			}
		})
	}
	if n != 2 {
		t.Fatalf("expected 2 sealed vectors, found %d", n)
	}
}

func TestRejects(t *testing.T) {
	a, _ := key.NewPrivate()
	b, _ := key.NewPrivate()
	c, _ := key.NewPrivate()
	body, err := envelope.Seal([]byte("hello"), b.Public(), a)
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Clone(body)
	tampered[len(tampered)-1] ^= 1
	cases := map[string]struct {
		body []byte
		priv key.Private
	}{
		"tampered":      {tampered, b},
		"truncated":     {body[:len(body)-1], b},
		"short":         {body[:10], b},
		"empty":         {nil, b},
		"wrong key":     {body, c},
		"nonce only":    {body[:envelope.NonceSize], b},
		"nonce flipped": {append([]byte{body[0] ^ 1}, body[1:]...), b},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := envelope.Open(tc.body, a.Public(), tc.priv); !errors.Is(err, envelope.ErrOpen) {
				t.Fatalf("want ErrOpen, got %v", err)
			}
		})
	}
	if got, err := envelope.Open(body, a.Public(), b); err != nil || string(got) != "hello" {
		t.Fatalf("genuine body: %v %q", err, got)
	}
}

func FuzzOpen(f *testing.F) {
	a := mustPriv(f, "AAIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eH2A=")
	b := mustPriv(f, "gIGCg4SFhoeIiYqLjI2Oj5CRkpOUlZaXmJmam5ydnl8=")
	s := envelope.NewShared(b, a.Public())
	genuine, _ := envelope.Seal([]byte{0x0a, 0x03, 0x0a, 0x01, 0x61}, b.Public(), a)
	f.Add(genuine)
	f.Add([]byte{})
	f.Add(make([]byte, envelope.Overhead))
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := s.Open(body)
		if err != nil {
			if !errors.Is(err, envelope.ErrOpen) {
				t.Fatalf("unexpected error type %v", err)
			}
			return
		}
		// Anything that opens must have been sealed with this key: re-sealing
		// with the same nonce reproduces it exactly.
		var nonce [envelope.NonceSize]byte
		copy(nonce[:], body)
		if !bytes.Equal(envelope.NewShared(a, b.Public()).SealWithNonce(out, nonce), body) {
			t.Fatal("opened a body that does not re-seal identically")
		}
	})
}

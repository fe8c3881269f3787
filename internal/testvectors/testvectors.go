// Package testvectors locates and loads the shared wire and relay test
// vectors (../shared/vectors beside the repository). It is used by tests
// only; it never embeds the vectors in the repository.
package testvectors

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Wire is the layout of wire-vectors.json.
type Wire struct {
	MethodPaths   []string          `json:"method_paths"`
	SignalHeaders map[string]string `json:"signal_headers"`
	Vectors       []WireVector      `json:"vectors"`
}

// WireVector is one encoded message, optionally with the keys that sealed it.
type WireVector struct {
	Name            string          `json:"name"`
	Message         string          `json:"message"`
	Fields          json.RawMessage `json:"fields"`
	Hex             string          `json:"hex"`
	BodyHex         string          `json:"body_hex"`
	NonceHex        string          `json:"nonce_hex"`
	PlaintextHex    string          `json:"plaintext_hex"`
	ClientPrivate   string          `json:"client_private"`
	ClientPublic    string          `json:"client_public"`
	ServerPrivate   string          `json:"server_private"`
	ServerPublic    string          `json:"server_public"`
	SenderPrivate   string          `json:"sender_private"`
	SenderPublic    string          `json:"sender_public"`
	ReceiverPrivate string          `json:"receiver_private"`
	ReceiverPublic  string          `json:"receiver_public"`
}

// Dir returns the shared vectors directory, or skips the test when it is absent.
func Dir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("WIREMESH_VECTORS"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	// internal/testvectors/testvectors.go -> repo root -> ../shared/vectors
	d := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "vectors")
	if _, err := os.Stat(d); err != nil {
		t.Skipf("shared test vectors not found at %s (set WIREMESH_VECTORS): %v", d, err)
	}
	return d
}

// LoadWire reads wire-vectors.json.
func LoadWire(t testing.TB) Wire {
	t.Helper()
	var w Wire
	load(t, filepath.Join(Dir(t), "wire-vectors.json"), &w)
	return w
}

// Load decodes the named JSON file of the vectors directory into v.
func Load(t testing.TB, name string, v any) {
	t.Helper()
	load(t, filepath.Join(Dir(t), name), v)
}

func load(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
}

package testacme_test

import (
	"testing"

	"github.com/wiremesh/wiremesh/internal/testacme"
)

// TestStart: pebble answers its directory over https with the CA the
// package hands out, and its issuing root is fetched.
func TestStart(t *testing.T) {
	ca := testacme.Start(t, testacme.Options{})
	if ca.Directory == "" || len(ca.RootsPEM) == 0 || ca.HTTPPort == 0 || ca.TLSPort == 0 {
		t.Fatalf("incomplete CA: %+v", ca)
	}
}

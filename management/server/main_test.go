package server_test

import (
	"os"
	"testing"

	"github.com/wiremesh/wiremesh/management/storetest"
)

// engines serves the REST tests of this package on both store engines
// from one Postgres server for the whole binary. A test runs its body on
// each engine as subtests with
//
//	func TestX(t *testing.T) { engines.Each(t, testX) }
//
//	func testX(t *testing.T, eng storetest.Engine) { ... }
//
// and builds its server on eng (startOn / ownerAPI in management/server,
// newRig / newDocRig in management/httpapi): every subtest gets a fresh
// database, dropped when it ends.
var engines storetest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	engines.Close()
	os.Exit(code)
}

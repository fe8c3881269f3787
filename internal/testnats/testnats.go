// Package testnats runs a real NATS server (nats-server embedded) for
// tests: in the test's process, or as the testnatsd process where a test
// needs it inside a network namespace.
package testnats

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Run starts a NATS server on host:port (port 0: any free one) and returns
// it with its client URL. Stop it with Shutdown.
func Run(host string, port int) (*server.Server, string, error) {
	if port == 0 {
		port = server.RANDOM_PORT
	}
	s, err := server.NewServer(&server.Options{Host: host, Port: port, NoLog: true, NoSigs: true, MaxPayload: 64 << 10})
	if err != nil {
		return nil, "", fmt.Errorf("nats server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, "", fmt.Errorf("nats server on %s not ready", net.JoinHostPort(host, strconv.Itoa(port)))
	}
	return s, s.ClientURL(), nil
}

// T is the part of testing.TB Start uses.
type T interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}

// Start runs a NATS server on loopback for the rest of the test.
func Start(t T) (*server.Server, string) {
	t.Helper()
	s, url, err := Run("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s, url
}

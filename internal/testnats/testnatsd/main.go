// Command testnatsd runs an embedded NATS server for tests that need one
// as a separate process (inside a network namespace). Not for production:
// run a real nats-server cluster there.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/wiremesh/wiremesh/internal/testnats"
)

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 4222, "port to listen on")
	flag.Parse()
	s, url, err := testnats.Run(*host, *port)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "testnatsd: NATS ready at", url)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	<-ch
	s.Shutdown()
}

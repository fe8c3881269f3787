package testacme_test

import (
	"net"
	"os/exec"
	"strings"
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

// TestStartPortTaken: when another process takes a port picked for
// pebble's DNS server before it binds it, Start begins again on new ports
// instead of failing the test.
func TestStartPortTaken(t *testing.T) {
	var taken []net.PacketConn
	defer func() {
		for _, pc := range taken {
			pc.Close()
		}
	}()
	cmd := func(args ...string) *exec.Cmd {
		// The first DNS server finds its port taken.
		if len(taken) == 0 && strings.HasSuffix(args[0], "pebble-challtestsrv") {
			for i, a := range args {
				if a == "-dnsserver" {
					pc, err := net.ListenPacket("udp4", args[i+1])
					if err != nil {
						t.Fatal(err)
					}
					taken = append(taken, pc)
				}
			}
		}
		return exec.Command(args[0], args[1:]...)
	}
	ca := testacme.Start(t, testacme.Options{Cmd: cmd})
	if len(taken) != 1 {
		t.Fatalf("took %d ports, want the first DNS server's", len(taken))
	}
	if ca.Directory == "" || len(ca.RootsPEM) == 0 {
		t.Fatalf("incomplete CA: %+v", ca)
	}
}

package turnserver

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/pion/turn/v4"
)

const secret = "turn-test-secret"

// creds are TURN REST credentials as management issues them.
func creds(name string, exp time.Time) (user, pass string) {
	user = strconv.FormatInt(exp.Unix(), 10)
	if name != "" {
		user += ":" + name
	}
	return user, password(user)
}

// password is what management issues for user.
func password(user string) string {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(user))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func start(t *testing.T, o Options) *Server {
	t.Helper()
	o.Listen, o.RelayIP, o.Secret = "127.0.0.1:0", netip.MustParseAddr("127.0.0.1"), secret
	s, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// allocate runs a real pion/turn client against s and allocates a relay.
func allocate(t *testing.T, s *Server) (*turn.Client, net.PacketConn) {
	t.Helper()
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	addr := "127.0.0.1:" + strconv.Itoa(s.Port())
	user, pass := creds("peer-1", time.Now().Add(time.Hour))
	c, err := turn.NewClient(&turn.ClientConfig{STUNServerAddr: addr, TURNServerAddr: addr, Conn: conn, Username: user, Password: pass, Realm: "wiremesh"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Listen(); err != nil {
		t.Fatal(err)
	}
	relay, err := c.Allocate()
	if err != nil {
		t.Fatalf("allocate: %v", err)
	}
	t.Cleanup(func() { relay.Close() })
	return c, relay
}

// TestRelayToServerRefused: a client holding valid credentials cannot have
// the server send to its own loopback, its own addresses, link-local
// (metadata) or overlay addresses; an address the operator allows is
// relayed to. All traffic stays on loopback: the refused permissions send
// nothing, and the allowed peer is 127.0.0.2.
func TestRelayToServerRefused(t *testing.T) {
	allowed := netip.MustParsePrefix("127.0.0.2/32")
	s := start(t, Options{AllowedPeers: []netip.Prefix{allowed}})
	c, relay := allocate(t, s)

	refused := []string{"127.0.0.1", "127.0.0.53", "0.0.0.0", "169.254.169.254", "100.64.0.1", "224.0.0.1", "255.255.255.255"}
	own, err := InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range own {
		if a.Is4() {
			refused = append(refused, a.String()) // the server's own addresses
		}
	}
	for _, ip := range refused {
		if err := c.CreatePermission(&net.UDPAddr{IP: net.ParseIP(ip), Port: 22}); err == nil {
			t.Errorf("permission to relay to %s granted", ip)
		}
	}
	if got := s.permsRefused.Load(); got < int64(len(refused)) {
		t.Errorf("refusals counted %d, want at least %d", got, len(refused))
	}

	peer, err := net.ListenPacket("udp4", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if _, err := relay.WriteTo([]byte("allowed"), peer.LocalAddr()); err != nil {
		t.Fatalf("relay to an allowed peer: %v", err)
	}
	buf := make([]byte, 64)
	_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := peer.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "allowed" {
		t.Fatalf("allowed peer got %q from %v: %v", buf[:n], from, err)
	}
}

// TestDeniedByOperator: --turn-denied-peer-ip ranges are refused too.
func TestDeniedByOperator(t *testing.T) {
	s := start(t, Options{
		AllowedPeers: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		DeniedPeers:  []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	})
	c, _ := allocate(t, s)
	if err := c.CreatePermission(&net.UDPAddr{IP: net.ParseIP("10.1.2.3"), Port: 22}); err == nil {
		t.Fatal("permission to an operator-denied range granted")
	}
	if err := c.CreatePermission(&net.UDPAddr{IP: net.ParseIP("127.0.0.9"), Port: 22}); err != nil {
		t.Fatalf("permission to an allowed address: %v", err)
	}
}

func TestPeerPolicy(t *testing.T) {
	own := []netip.Addr{netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("192.168.1.10")}
	p := NewPeerPolicy(own, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")})
	for addr, want := range map[string]bool{
		"8.8.8.8": true, "192.168.1.11": true, "2001:4860::8888": true, "10.9.1.1": true,
		"192.168.1.10": false, "::ffff:192.168.1.10": false, "127.0.0.1": false, "::ffff:127.0.0.1": false,
		"::1": false, "0.0.0.0": false, "::": false, "169.254.169.254": false, "fe80::1%eth0": false,
		"100.64.0.1": false, "100.127.255.254": false, "224.0.0.251": false, "ff02::1": false,
		"255.255.255.255": false, "10.1.1.1": false, "64:ff9b::7f00:1": false, "2002:7f00:1::": false,
	} {
		if got := p.Allowed(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Allowed(%s) = %v, want %v", addr, got, want)
		}
	}
	if p.Allowed(netip.Addr{}) {
		t.Error("the zero address allowed")
	}
}

func TestAuthKey(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for name, c := range map[string]struct {
		user string
		ok   bool
	}{
		"plain":      {"1700003600", true},
		"named":      {"1700003600:peer-a", true},
		"expired":    {"1700000000:peer-a", false},
		"not a time": {"peer-a:1700003600", false},
		"empty":      {"", false},
	} {
		if _, ok := AuthKey([]byte(secret), c.user, "wiremesh", now); ok != c.ok {
			t.Errorf("%s: ok %v, want %v", name, ok, c.ok)
		}
	}
	// The key is what pion derives from the password management issued.
	user, pass := creds("peer-a", now.Add(time.Hour))
	k, _ := AuthKey([]byte(secret), user, "wiremesh", now)
	if string(k) != string(turn.GenerateAuthKey(user, "wiremesh", pass)) {
		t.Fatal("key does not match the issued password")
	}
}

package relaywire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/testvectors"
)

// vectors is the part of relay-vectors.json these tests read.
type vectors struct {
	Keys struct {
		A string `json:"peerA_public_b64"`
		B string `json:"peerB_public_b64"`
	} `json:"keys"`
	PeerID struct {
		AHex    string `json:"peerA_peer_id_hex"`
		BHex    string `json:"peerB_peer_id_hex"`
		AString string `json:"peerA_peer_id_string"`
	} `json:"peer_id"`
	Token struct {
		Secret       string `json:"relay_auth_secret"`
		Payload      string `json:"payload_ascii"`
		SigB64       string `json:"management_proto_tokenSignature_b64"`
		BinaryHex    string `json:"token_binary_hex"`
		ExpiredHex   string `json:"expired_token_hex"`
		ExpiredValue string `json:"expired_payload_ascii"`
	} `json:"token"`
	Auth struct {
		Hex string `json:"hex"`
	} `json:"auth"`
	AuthResponse map[string]any `json:"auth_response"`
	Transport    struct {
		Up      string `json:"client_A_to_server_dst_B_hex"`
		Down    string `json:"server_to_client_B_src_A_hex"`
		Payload string `json:"payload_hex"`
	} `json:"transport"`
	PeerState struct {
		Online      string `json:"peers_online_B_hex"`
		Offline     string `json:"peers_went_offline_B_hex"`
		SubAB       string `json:"subscribe_A_and_B_hex"`
		SubB        string `json:"subscribe_B_hex"`
		UnsubB      string `json:"unsubscribe_B_hex"`
		Split245Len []int  `json:"split_245_ids_message_sizes"`
	} `json:"peer_state"`
	Close       struct{ Hex string } `json:"close"`
	Healthcheck struct{ Hex string } `json:"healthcheck"`
	HCAgent     struct {
		AuthHex string `json:"auth_msg_hex"`
		IDHex   string `json:"peer_id_hex"`
		Input   string `json:"peer_id_input"`
	} `json:"healthcheck_agent_auth"`
}

func load(t *testing.T) vectors {
	var v vectors
	testvectors.Load(t, "relay-vectors.json", &v)
	return v
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVectors(t *testing.T) {
	v := load(t)
	a, b := HashID(v.Keys.A), HashID(v.Keys.B)
	if hex.EncodeToString(a[:]) != v.PeerID.AHex || hex.EncodeToString(b[:]) != v.PeerID.BHex || a.String() != v.PeerID.AString {
		t.Fatalf("peer IDs %x %x %s", a, b, a)
	}
	if hc := HashID(v.HCAgent.Input); hex.EncodeToString(hc[:]) != v.HCAgent.IDHex {
		t.Fatalf("healthcheck-agent ID %x", hc)
	}

	exp := time.Unix(1900000000, 0)
	cr := Issue(v.Token.Secret, exp)
	if cr.Payload != v.Token.Payload || cr.Signature != v.Token.SigB64 {
		t.Fatalf("issued %+v", cr)
	}
	tok, err := cr.Binary()
	if err != nil || hex.EncodeToString(tok) != v.Token.BinaryHex {
		t.Fatalf("binary token %x %v", tok, err)
	}
	if got := Auth(a, tok); hex.EncodeToString(got) != v.Auth.Hex {
		t.Fatalf("auth %x", got)
	}
	id, gotTok, err := ParseAuth(unhex(t, v.Auth.Hex))
	if err != nil || id != a || !bytes.Equal(gotTok, tok) {
		t.Fatalf("parse auth: %s %x %v", id, gotTok, err)
	}
	now := time.Unix(1800000000, 0)
	if err := Validate(v.Token.Secret, tok, now); err != nil {
		t.Fatalf("valid token refused: %v", err)
	}
	if err := Validate(v.Token.Secret, tok, exp); err != nil {
		t.Fatalf("the expiry second itself must be valid: %v", err)
	}
	if err := Validate(v.Token.Secret, tok, exp.Add(time.Second)); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("after expiry: %v", err)
	}
	if err := Validate("wrong-secret", tok, now); !errors.Is(err, ErrTokenSignature) {
		t.Fatalf("wrong secret: %v", err)
	}
	if err := Validate(v.Token.Secret, unhex(t, v.Token.ExpiredHex), now); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("expired vector: %v", err)
	}
	// The healthcheck agent's dummy token fails, as it should.
	_, hcTok, err := ParseAuth(unhex(t, v.HCAgent.AuthHex))
	if err != nil || Validate(v.Token.Secret, hcTok, now) == nil {
		t.Fatalf("healthcheck auth: %v", err)
	}

	for url, raw := range v.AuthResponse {
		m, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		if got := AuthResponse(url); hex.EncodeToString(got) != m["hex"] {
			t.Fatalf("auth response %s: %x", url, got)
		}
		if got, err := ParseAuthResponse(unhex(t, m["hex"].(string))); err != nil || got != url {
			t.Fatalf("parse auth response: %q %v", got, err)
		}
	}

	payload := unhex(t, v.Transport.Payload)
	up := Transport(b, payload)
	if hex.EncodeToString(up) != v.Transport.Up {
		t.Fatalf("transport up %x", up)
	}
	dst, p, err := ParseTransport(up)
	if err != nil || dst != b || !bytes.Equal(p, payload) {
		t.Fatal("parse transport")
	}
	SetTransportID(up, a)
	if hex.EncodeToString(up) != v.Transport.Down {
		t.Fatalf("transport down %x", up)
	}

	for name, c := range map[string]struct {
		got  [][]byte
		want string
	}{
		"online":      {PeerList(TypePeersOnline, []PeerID{b}), v.PeerState.Online},
		"offline":     {PeerList(TypePeersOff, []PeerID{b}), v.PeerState.Offline},
		"subscribe":   {PeerList(TypeSubscribe, []PeerID{b}), v.PeerState.SubB},
		"subscribeAB": {PeerList(TypeSubscribe, []PeerID{a, b}), v.PeerState.SubAB},
		"unsubscribe": {PeerList(TypeUnsubscribe, []PeerID{b}), v.PeerState.UnsubB},
	} {
		if len(c.got) != 1 || hex.EncodeToString(c.got[0]) != c.want {
			t.Fatalf("%s: %x", name, c.got)
		}
	}
	ids, err := ParsePeerList(unhex(t, v.PeerState.SubAB))
	if err != nil || len(ids) != 2 || ids[0] != a || ids[1] != b {
		t.Fatalf("parse list %v %v", ids, err)
	}
	many := make([]PeerID, 245)
	msgs := PeerList(TypeSubscribe, many)
	if len(msgs) != len(v.PeerState.Split245Len) || len(msgs[0]) != v.PeerState.Split245Len[0] || len(msgs[1]) != v.PeerState.Split245Len[1] {
		t.Fatalf("245 IDs split into %d messages", len(msgs))
	}
	if hex.EncodeToString(Simple(TypeClose)) != v.Close.Hex || hex.EncodeToString(Simple(TypeHealthCheck)) != v.Healthcheck.Hex {
		t.Fatal("close or health check")
	}
}

func TestMalformed(t *testing.T) {
	v := load(t)
	auth := unhex(t, v.Auth.Hex)
	bad := map[string][]byte{
		"empty":        {},
		"one byte":     {1},
		"version 2":    append([]byte{2}, auth[1:]...),
		"not auth":     {1, 3},
		"no magic":     append([]byte{1, 6, 0, 0, 0, 0}, auth[6:]...),
		"short":        auth[:20],
		"oversized":    append(append([]byte{}, auth...), make([]byte, MaxHandshakeSize)...),
		"legacy hello": {1, 1},
	}
	for name, msg := range bad {
		if _, _, err := ParseAuth(msg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ParsePeerList([]byte{1, 8, 1, 2, 3}); err == nil {
		t.Error("ragged peer list accepted")
	}
	if _, err := ParsePeerList([]byte{1, 8}); err == nil {
		t.Error("empty peer list accepted")
	}
	if _, err := ParseAuthResponse([]byte{1, 7}); err == nil {
		t.Error("empty auth response accepted")
	}
	for _, tok := range [][]byte{nil, {2}, {1, 2, 3}, append([]byte{1}, make([]byte, 32)...)} {
		if Validate("s", tok, time.Now()) == nil {
			t.Errorf("token %x accepted", tok)
		}
	}
}

// FuzzParse feeds arbitrary bytes to every parser a relay peer's input
// reaches; none may panic, and what parses must re-encode identically.
func FuzzParse(f *testing.F) {
	f.Add([]byte{1, 6, 0x21, 0x12, 0xa4, 0x42})
	f.Add(Transport(HashID("k"), []byte{1, 2, 3}))
	f.Add(PeerList(TypeSubscribe, []PeerID{HashID("a"), HashID("b")})[0])
	f.Add(AuthResponse("rel://x:1"))
	f.Add([]byte{1, 5})
	f.Fuzz(func(t *testing.T, msg []byte) {
		typ, err := Header(msg)
		if err != nil {
			return
		}
		switch typ {
		case TypeAuth:
			if id, tok, err := ParseAuth(msg); err == nil {
				if !bytes.Equal(Auth(id, tok), msg) {
					t.Fatal("auth does not round-trip")
				}
				_ = Validate("secret", tok, time.Now())
			}
		case TypeTransport:
			if id, p, err := ParseTransport(msg); err == nil && !bytes.Equal(Transport(id, p), msg) {
				t.Fatal("transport does not round-trip")
			}
		case TypeSubscribe, TypeUnsubscribe, TypePeersOnline, TypePeersOff:
			if ids, err := ParsePeerList(msg); err == nil && len(ids) <= MaxIDsPerMessage && !bytes.Equal(PeerList(typ, ids)[0], msg) {
				t.Fatal("peer list does not round-trip")
			}
		case TypeAuthResp:
			if u, err := ParseAuthResponse(msg); err == nil && !bytes.Equal(AuthResponse(u), msg) {
				t.Fatal("auth response does not round-trip")
			}
		}
	})
}

// TestBoundToken: a token issued for peer A carries A's ID, fits the auth
// message, and its claims refuse any other peer; an unbound token is
// refused unless unbound tokens are allowed.
func TestBoundToken(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	a, b := HashID("e06Qm75//kTEZaIgA31gjuNYl9Me+XLwf3SJLLD3PxM="), HashID("D6poTtKIZ7l/Smot7l34zpdOdrcBjj8iocTPJnhXDyA=")
	tok, err := IssueFor("s", now.Add(time.Hour), a).Binary()
	if err != nil {
		t.Fatal(err)
	}
	if len(Auth(a, tok)) > MaxHandshakeSize {
		t.Fatalf("auth with a bound token is %d bytes, over %d", len(Auth(a, tok)), MaxHandshakeSize)
	}
	c, err := Check("s", tok, now)
	if err != nil || !c.Bound || c.Peer != a {
		t.Fatalf("claims %+v %v", c, err)
	}
	if c.For(a, false) != nil || !errors.Is(c.For(b, true), ErrTokenOtherPeer) {
		t.Fatal("a bound token must serve its own peer only")
	}
	unbound, _ := Issue("s", now.Add(time.Hour)).Binary()
	c, err = Check("s", unbound, now)
	if err != nil || c.Bound || !errors.Is(c.For(a, false), ErrTokenUnbound) || c.For(a, true) != nil {
		t.Fatalf("unbound claims %+v %v", c, err)
	}
	// Rebinding a genuine token to another peer breaks its signature.
	forged := append([]byte(nil), tok[:len(tok)-2]...)
	forged = append(forged, 'A', 'A')
	if _, err := Check("s", forged, now); !errors.Is(err, ErrTokenSignature) {
		t.Fatalf("altered binding: %v", err)
	}
}

// Package relaywire is the NetBird relay protocol's wire format, shared by
// our relay server, our agent's relay client and management's token
// issuer: peer IDs, the 2-byte-header messages (one per WebSocket message
// or QUIC datagram, no length field) and the HMAC tokens. It is pure
// encoding; transports and state live with their owners.
package relaywire

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
)

// Protocol constants (SPEC-relay §4).
const (
	Version          = 1
	MaxHandshakeSize = 212  // the auth message
	MaxHandshakeResp = 8192 // the auth response
	MaxMessageSize   = 8820 // every other message
	HeaderSize       = 2
	TransportHeader  = HeaderSize + PeerIDSize
	// MaxIDsPerMessage is how many peer IDs fit one peer-state message.
	MaxIDsPerMessage = (MaxMessageSize - HeaderSize) / PeerIDSize
)

// Type is a message type.
type Type byte

// Message types.
const (
	TypeUnknown     Type = 0
	TypeTransport   Type = 3
	TypeClose       Type = 4
	TypeHealthCheck Type = 5
	TypeAuth        Type = 6
	TypeAuthResp    Type = 7
	TypeSubscribe   Type = 8
	TypeUnsubscribe Type = 9
	TypePeersOnline Type = 10
	TypePeersOff    Type = 11
)

func (t Type) String() string {
	switch t {
	case TypeTransport:
		return "transport"
	case TypeClose:
		return "close"
	case TypeHealthCheck:
		return "health check"
	case TypeAuth:
		return "auth"
	case TypeAuthResp:
		return "auth response"
	case TypeSubscribe:
		return "subscribe"
	case TypeUnsubscribe:
		return "unsubscribe"
	case TypePeersOnline:
		return "peers online"
	case TypePeersOff:
		return "peers went offline"
	}
	return fmt.Sprintf("type %d", byte(t))
}

// FromClient reports whether a client may send t.
func (t Type) FromClient() bool {
	switch t {
	case TypeTransport, TypeClose, TypeHealthCheck, TypeAuth, TypeSubscribe, TypeUnsubscribe:
		return true
	}
	return false
}

// PeerIDSize is the length of a peer ID: "sha-" and a SHA-256.
const PeerIDSize = 36

// PeerID identifies a peer on a relay.
type PeerID [PeerIDSize]byte

// HashID derives the peer ID from the base64 text of a WireGuard public key
// (the text, not the 32 key bytes).
func HashID(publicKey string) PeerID {
	var id PeerID
	copy(id[:], "sha-")
	sum := sha256.Sum256([]byte(publicKey))
	copy(id[4:], sum[:])
	return id
}

// String is the form logs use: "sha-" and the base64 of the hash.
func (id PeerID) String() string { return "sha-" + base64.StdEncoding.EncodeToString(id[4:]) }

// Errors of message parsing.
var (
	ErrShort   = errors.New("relay message too short")
	ErrVersion = errors.New("unsupported relay protocol version")
	ErrLong    = errors.New("relay message too long")
)

// authMagic precedes the peer ID in an auth message.
var authMagic = [4]byte{0x21, 0x12, 0xa4, 0x42}

// Header checks the 2-byte header and returns the type.
func Header(msg []byte) (Type, error) {
	if len(msg) < HeaderSize {
		return TypeUnknown, ErrShort
	}
	if msg[0] != Version {
		return TypeUnknown, fmt.Errorf("%w %d", ErrVersion, msg[0])
	}
	return Type(msg[1]), nil
}

// Simple returns a header-only message (close, health check).
func Simple(t Type) []byte { return []byte{Version, byte(t)} }

// Auth builds the auth message: magic, the sender's ID, the token.
func Auth(id PeerID, token []byte) []byte {
	b := make([]byte, 0, HeaderSize+4+PeerIDSize+len(token))
	b = append(b, Version, byte(TypeAuth))
	b = append(b, authMagic[:]...)
	b = append(b, id[:]...)
	return append(b, token...)
}

// ParseAuth splits an auth message into the claimed ID and the token.
func ParseAuth(msg []byte) (PeerID, []byte, error) {
	var id PeerID
	t, err := Header(msg)
	if err != nil {
		return id, nil, err
	}
	if t != TypeAuth {
		return id, nil, fmt.Errorf("unexpected message type %s before auth", t)
	}
	if len(msg) > MaxHandshakeSize {
		return id, nil, fmt.Errorf("%w: auth of %d bytes", ErrLong, len(msg))
	}
	if len(msg) < HeaderSize+4+PeerIDSize {
		return id, nil, ErrShort
	}
	if [4]byte(msg[2:6]) != authMagic {
		return id, nil, errors.New("auth message without the magic cookie")
	}
	copy(id[:], msg[6:6+PeerIDSize])
	return id, msg[6+PeerIDSize:], nil
}

// AuthResponse carries the server's instance URL.
func AuthResponse(instanceURL string) []byte {
	return append([]byte{Version, byte(TypeAuthResp)}, instanceURL...)
}

// ParseAuthResponse returns the instance URL.
func ParseAuthResponse(msg []byte) (string, error) {
	t, err := Header(msg)
	if err != nil {
		return "", err
	}
	if t != TypeAuthResp {
		return "", fmt.Errorf("unexpected message type %s instead of the auth response", t)
	}
	if len(msg) > MaxHandshakeResp {
		return "", fmt.Errorf("%w: auth response of %d bytes", ErrLong, len(msg))
	}
	if len(msg) == HeaderSize {
		return "", errors.New("auth response without an instance URL")
	}
	return string(msg[HeaderSize:]), nil
}

// Transport builds a transport message for id (the destination going up,
// the source coming down) around payload.
func Transport(id PeerID, payload []byte) []byte {
	b := make([]byte, TransportHeader+len(payload))
	b[0], b[1] = Version, byte(TypeTransport)
	copy(b[HeaderSize:], id[:])
	copy(b[TransportHeader:], payload)
	return b
}

// ParseTransport returns the message's peer ID and payload (aliasing msg).
func ParseTransport(msg []byte) (PeerID, []byte, error) {
	var id PeerID
	if len(msg) < TransportHeader {
		return id, nil, ErrShort
	}
	copy(id[:], msg[HeaderSize:TransportHeader])
	return id, msg[TransportHeader:], nil
}

// SetTransportID rewrites the peer ID of a transport message in place, as
// the server does when it forwards (destination becomes source).
func SetTransportID(msg []byte, id PeerID) { copy(msg[HeaderSize:TransportHeader], id[:]) }

// PeerList builds peer-state messages of type t, split at
// MaxIDsPerMessage IDs each.
func PeerList(t Type, ids []PeerID) [][]byte {
	var out [][]byte
	for len(ids) > 0 {
		n := min(len(ids), MaxIDsPerMessage)
		b := make([]byte, 0, HeaderSize+n*PeerIDSize)
		b = append(b, Version, byte(t))
		for _, id := range ids[:n] {
			b = append(b, id[:]...)
		}
		out = append(out, b)
		ids = ids[n:]
	}
	return out
}

// ParsePeerList returns the IDs of a peer-state message.
func ParsePeerList(msg []byte) ([]PeerID, error) {
	if len(msg) < HeaderSize {
		return nil, ErrShort
	}
	body := msg[HeaderSize:]
	if len(body) == 0 || len(body)%PeerIDSize != 0 {
		return nil, fmt.Errorf("peer list of %d bytes is not a multiple of %d", len(body), PeerIDSize)
	}
	ids := make([]PeerID, len(body)/PeerIDSize)
	for i := range ids {
		copy(ids[i][:], body[i*PeerIDSize:])
	}
	return ids, nil
}

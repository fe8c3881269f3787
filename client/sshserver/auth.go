// Package sshserver is the agent's SSH server: it listens only on the
// peer's overlay address and lets in the mesh's peers by the SSH keys the
// network map carries for them, when a policy lets them reach this peer on
// tcp/22 (or NetBird's internal SSH port 22022). Its host key is derived
// from the agent's WireGuard key (or, once rotated, a random key kept in
// the profile), and management hands its public half to every peer, so
// clients check it without trust on first use.
package sshserver

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"
	"net/netip"
	"slices"

	"golang.org/x/crypto/ssh"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/internal/key"
)

// Ports: NetBird's agents serve SSH on 22 of the overlay address
// (redirected to 22022 where the host's sshd holds 22); we listen on both.
const (
	Port         = 22
	InternalPort = 22022
)

// hostKeyInfo separates the SSH key from anything else ever derived from
// the WireGuard key; changing it changes every peer's SSH key.
const hostKeyInfo = "wiremesh ssh host key v1"

// PrivateKey is the ed25519 key behind HostKey (for `netbird ssh-config
// --identity-file`).
func PrivateKey(priv key.Private) (ed25519.PrivateKey, error) {
	seed, err := hkdf.Key(sha256.New, priv[:], nil, hostKeyInfo, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("deriving the SSH key: %w", err)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// HostKey is the agent's SSH key: an ed25519 key derived from its
// WireGuard private key, so it is persisted with the profile, reported at
// every login (whichever path logs in) and rotates with the WireGuard key.
// It is both the server's host key and the client key of `netbird ssh`.
func HostKey(priv key.Private) (ssh.Signer, error) {
	k, err := PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	return ssh.NewSignerFromKey(k)
}

// AuthorizedKey is the public half of HostKey in authorized_keys form, as
// the agent reports it to management (PeerKeys.sshPubKey).
func AuthorizedKey(priv key.Private) (string, error) {
	k, err := PrivateKey(priv)
	if err != nil {
		return "", err
	}
	return AuthorizedKeyOf(k)
}

// AgentKey is the agent's SSH key: rotated, a random key the profile
// keeps (netbird ssh rotate-key), else (nil) the one derived from its
// WireGuard key, so agents that never rotated keep theirs.
func AgentKey(priv key.Private, rotated ed25519.PrivateKey) (ed25519.PrivateKey, error) {
	if rotated != nil {
		return rotated, nil
	}
	return PrivateKey(priv)
}

// Signer is k as the server's host key and the client key of `netbird
// ssh`.
func Signer(k ed25519.PrivateKey) (ssh.Signer, error) {
	s, err := ssh.NewSignerFromKey(k)
	if err != nil {
		return nil, fmt.Errorf("SSH key: %w", err)
	}
	return s, nil
}

// AuthorizedKeyOf is k's public half in authorized_keys form, as the
// agent reports it to management (PeerKeys.sshPubKey).
func AuthorizedKeyOf(k ed25519.PrivateKey) (string, error) {
	s, err := Signer(k)
	if err != nil {
		return "", err
	}
	return string(bytes.TrimSpace(ssh.MarshalAuthorizedKey(s.PublicKey()))), nil
}

// Peer is a remote peer of the network map.
type Peer struct {
	Name string // its FQDN, for logs and messages
	IP   netip.Addr
	Key  ssh.PublicKey // nil: it can log in only with a token (JWT)
}

// Access is what the current network map allows: the peers with their
// keys and the map's firewall rules (as the agent's packet filter gets
// them). The engine replaces it on every map.
type Access struct {
	Peers    []Peer
	Rules    []acl.Rule
	AllowAll bool // the map's legacy allow-all
	// Self is this peer's name (its FQDN) in refusals; "": "this peer".
	Self string
	// JWT, when the map carries a jwtConfig, also lets peers log in with
	// a token of the account's identity provider (NetBird's JWT check;
	// jwt.go). Peers need no SSH key for it.
	JWT *JWTAuth
}

// ParsePeerKey parses a peer's key as the map carries it
// (authorized_keys form); an empty key is no key.
func ParsePeerKey(b []byte) (ssh.PublicKey, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	k, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		return nil, fmt.Errorf("SSH public key: %w", err)
	}
	return k, nil
}

// Authorize decides whether a client presenting k from the overlay
// address from may log in. The key must be a map peer's, the connection
// must come from that peer's own overlay address (so a key alone, copied
// elsewhere, is not enough), and a policy must let that peer reach this
// one on tcp/22 or tcp/22022: a matching inbound drop rule wins over
// accept rules, as in the packet filter.
func (a *Access) Authorize(k ssh.PublicKey, from netip.Addr) (Peer, error) {
	if a == nil {
		return Peer{}, fmt.Errorf("no network map yet")
	}
	from = from.Unmap()
	want := k.Marshal()
	// Every entry with the key is looked at: another peer reporting the
	// same key (a copy of it, or a hostile peer claiming a victim's) must
	// not shadow the entry of the peer at this address.
	var p Peer
	found, keyed := false, false
	for _, c := range a.Peers {
		if c.Key == nil || !bytes.Equal(c.Key.Marshal(), want) {
			continue
		}
		keyed = true
		if c.IP == from {
			p, found = c, true
			break
		}
	}
	if !keyed {
		return Peer{}, fmt.Errorf("key %s is no mesh peer's SSH key", ssh.FingerprintSHA256(k))
	}
	if !found {
		return Peer{}, fmt.Errorf("key %s presented from %s, which is not the address of a peer holding it", ssh.FingerprintSHA256(k), from)
	}
	if !a.allows(from) {
		return Peer{}, a.noPolicy(p)
	}
	return p, nil
}

// noPolicy is the refusal of map peer p, which no policy lets reach this
// peer on the SSH ports.
func (a *Access) noPolicy(p Peer) error {
	self := a.Self
	if self == "" {
		self = "this peer"
	}
	return &NoPolicyError{Peer: p.Name, IP: p.IP, Self: self}
}

// NoPolicyError refuses a map peer that no policy lets reach this peer on
// tcp/22 (or 22022).
type NoPolicyError struct {
	Peer string // the peer's FQDN
	IP   netip.Addr
	Self string // this peer's FQDN, or "this peer"
}

func (e *NoPolicyError) Error() string {
	return fmt.Sprintf("no policy lets peer %s (%s) reach %s on tcp/%d", e.Peer, e.IP, e.Self, Port)
}

// policyRefusal is why the map peer at overlay address from may not log
// in whatever it presents: no policy lets it reach this peer on the SSH
// ports. nil for an address of no map peer (its key decides, and is
// refused) and for a peer a policy allows. The address is the peer's
// own, WireGuard-authenticated: telling it why reveals nothing to anyone
// else.
func (a *Access) policyRefusal(from netip.Addr) error {
	if a == nil {
		return nil
	}
	from = from.Unmap()
	i := slices.IndexFunc(a.Peers, func(p Peer) bool { return p.IP == from })
	if i < 0 || a.allows(from) {
		return nil
	}
	return a.noPolicy(a.Peers[i])
}

func (a *Access) allows(from netip.Addr) bool {
	match := func(r acl.Rule, port uint16) bool {
		if !r.Inbound || (r.Peer.IsValid() && !r.Peer.IsUnspecified() && r.Peer != from) {
			return false
		}
		if r.Proto != acl.ProtoAny && r.Proto != acl.ProtoTCP {
			return false
		}
		return (r.PortLo == 0 && r.PortHi == 0) || (port >= r.PortLo && port <= r.PortHi)
	}
	for _, port := range []uint16{Port, InternalPort} {
		dropped := false
		for _, r := range a.Rules {
			if !r.Accept && match(r, port) {
				dropped = true
				break
			}
		}
		if dropped {
			continue
		}
		if a.AllowAll {
			return true
		}
		for _, r := range a.Rules {
			if r.Accept && match(r, port) {
				return true
			}
		}
	}
	return false
}

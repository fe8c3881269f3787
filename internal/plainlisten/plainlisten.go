// Package plainlisten decides where a server listens when it serves
// plaintext (no TLS of its own): on loopback unless the operator names a
// non-loopback address with --insecure-listen, so that setup keys, tokens
// and passwords never cross a network unencrypted by default. It does not
// listen itself and knows nothing of TLS; a server with TLS options checks
// those first.
package plainlisten

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Flag is the name of the flag accepting plaintext on the network.
const Flag = "--insecure-listen"

// ErrPublic is a plaintext listen address off loopback without Flag.
var ErrPublic = errors.New("refusing plaintext on a non-loopback address")

// Addr returns the address to listen on from --listen (listen),
// --insecure-listen (insecure) and the loopback default def; public is
// true when the result is off loopback (the caller logs a warning).
// tlsHint names the caller's TLS options for the refusal ("" if none).
func Addr(listen, insecure, def, tlsHint string) (addr string, public bool, err error) {
	if listen != "" && insecure != "" {
		return "", false, errors.New("--listen and " + Flag + " both set: " + Flag + " is the plaintext listen address, use one of them")
	}
	addr = listen
	if insecure != "" {
		addr = insecure
	}
	if addr == "" {
		addr = def
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false, fmt.Errorf("--listen %q: %w", addr, err)
	}
	if Loopback(host) {
		return addr, false, nil
	}
	if insecure == "" {
		how := "put a TLS reverse proxy in front and keep --listen on loopback"
		if tlsHint != "" {
			how = "serve TLS with " + tlsHint + ", or " + how
		}
		return "", false, fmt.Errorf("--listen %s: %w; %s, or accept plaintext with %s %s", addr, ErrPublic, how, Flag, addr)
	}
	return addr, true, nil
}

// Loopback reports whether host names only this machine.
func Loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

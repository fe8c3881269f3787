package main

import (
	"net"
	"strings"
	"testing"
)

// FuzzPlan: any combination of listen, TLS and public-URL settings either
// is refused or yields a listen address that parses, and a plaintext
// public address only with --insecure-listen.
func FuzzPlan(f *testing.F) {
	f.Add("", "", "", "", "", false)
	f.Add(":33073", "", "", "", "", false)
	f.Add("", "0.0.0.0:1", "", "", "http://vpn.example.com", false)
	f.Add("", "", "vpn.example.com", "", "", false)
	f.Add("127.0.0.1:8080", "", "", "", "https://vpn.example.com:8443/", false)
	f.Add("", "", "", "", "https://[::1]:443", true)
	f.Add("", "", "xn--bcher-kva.example", "a@b", "https://u@h/p?q#f", true)
	f.Fuzz(func(t *testing.T, listen, insecure, domain, email, publicURL string, certs bool) {
		fl := listenFlags{listen: listen, insecureListen: insecure, domain: domain, acmeEmail: email, publicURL: publicURL}
		if certs {
			fl.certFile, fl.keyFile = "c", "k"
		}
		p, err := plan(fl)
		if err != nil {
			return
		}
		host, _, err := net.SplitHostPort(p.Listen)
		if err != nil {
			t.Fatalf("plan(%+v) listens on %q: %v", fl, p.Listen, err)
		}
		if !p.TLS && !p.Insecure && !strings.EqualFold(host, "localhost") && !isLoopbackIP(host) {
			t.Fatalf("plan(%+v): plaintext on %q without --insecure-listen", fl, p.Listen)
		}
		if p.TLS && !p.PublicTLS {
			t.Fatalf("plan(%+v): TLS served but advertised plaintext", fl)
		}
		if p.PublicPort < 0 || p.PublicPort > 65535 {
			t.Fatalf("plan(%+v): public port %d", fl, p.PublicPort)
		}
	})
}

func isLoopbackIP(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

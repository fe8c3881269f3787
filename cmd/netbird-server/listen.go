package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/wiremesh/wiremesh/internal/acmecert"
	"github.com/wiremesh/wiremesh/internal/agentinstall"
	"github.com/wiremesh/wiremesh/internal/plainlisten"
)

// Default listen addresses: plaintext stays on loopback unless told
// otherwise (--insecure-listen); with TLS the server is meant to be
// reached from elsewhere.
const (
	defaultPlainListen = "127.0.0.1:33073"
	defaultTLSListen   = ":33073"
	defaultACMEListen  = ":443"
)

// listenFlags are the flags deciding where and how the server listens and
// what it tells clients; the Changed fields say whether a flag with a
// default was set at all.
type listenFlags struct {
	listen, insecureListen string
	certFile, keyFile      string
	domain                 string
	acmeEmail, acmeCAFile  string
	acmeDirChanged         bool
	acmeHTTPListen         string
	acmeHTTPChanged        bool
	publicURL, publicAddr  string
}

// listenPlan is what the flags decided.
type listenPlan struct {
	Listen   string // TCP address of the main listener
	Insecure bool   // plaintext on a non-loopback address: warn
	ACME     bool   // certificate for the domain from ACME
	// TLS: this process terminates TLS (certificate files or ACME).
	TLS bool
	// PublicHost is the host clients reach the server at ("": the host
	// each client dialed); PublicPort the port (0: the listen port).
	PublicHost string
	PublicPort int
	// PublicTLS: clients speak TLS to the public address (https,
	// rels://), served here or by a reverse proxy in front.
	PublicTLS bool
}

// plan checks the listen, TLS and public-address flags together and
// refuses combinations that are insecure or cannot work, naming the flag.
func plan(f listenFlags) (listenPlan, error) {
	var p listenPlan
	if f.certFile != "" && f.keyFile == "" {
		return p, errors.New("--tls-cert-file needs --tls-key-file")
	}
	if f.keyFile != "" && f.certFile == "" {
		return p, errors.New("--tls-key-file needs --tls-cert-file")
	}
	if f.listen != "" && f.insecureListen != "" {
		return p, errors.New("--listen and --insecure-listen both set: --insecure-listen is the plaintext listen address, use one of them")
	}
	if f.domain == "" {
		switch {
		case f.acmeEmail != "":
			return p, errors.New("--acme-email needs --domain")
		case f.acmeCAFile != "":
			return p, errors.New("--acme-ca-file needs --domain")
		case f.acmeDirChanged:
			return p, errors.New("--acme-directory needs --domain")
		case f.acmeHTTPChanged:
			return p, errors.New("--acme-http-listen needs --domain")
		}
	}
	switch {
	case f.domain != "":
		if err := acmecert.ValidDomain(f.domain); err != nil {
			return p, fmt.Errorf("--domain: %w", err)
		}
		switch {
		case f.certFile != "":
			return p, errors.New("--domain obtains the certificate by ACME: drop --tls-cert-file/--tls-key-file, or --domain to use those files")
		case f.insecureListen != "":
			return p, errors.New("--insecure-listen is plaintext, --domain serves TLS: choose the address with --listen")
		case f.publicURL != "":
			return p, fmt.Errorf("--public-url is for a TLS proxy in front; with --domain the public URL is https://%s", f.domain)
		case f.publicAddr != "" && !strings.EqualFold(f.publicAddr, f.domain):
			return p, fmt.Errorf("--public-address %s differs from --domain %s: clients must reach the server at the certificate's name", f.publicAddr, f.domain)
		}
		if f.acmeHTTPListen != "" {
			if _, _, err := net.SplitHostPort(f.acmeHTTPListen); err != nil {
				return p, fmt.Errorf("--acme-http-listen %q: %w", f.acmeHTTPListen, err)
			}
		}
		p = listenPlan{Listen: firstNonEmpty(f.listen, defaultACMEListen), ACME: true, TLS: true, PublicHost: strings.ToLower(f.domain), PublicTLS: true}
	case f.certFile != "":
		if f.insecureListen != "" {
			return p, errors.New("--insecure-listen is plaintext, --tls-cert-file serves TLS: choose the address with --listen")
		}
		p = listenPlan{Listen: firstNonEmpty(f.listen, defaultTLSListen), TLS: true, PublicHost: f.publicAddr, PublicTLS: true}
	default:
		var err error
		p.Listen, p.Insecure, err = plainlisten.Addr(f.listen, f.insecureListen, defaultPlainListen, "--domain NAME (ACME) or --tls-cert-file/--tls-key-file")
		if err != nil {
			return p, err
		}
		p.PublicHost = f.publicAddr
	}
	if _, _, err := net.SplitHostPort(p.Listen); err != nil {
		return p, fmt.Errorf("--listen %q: %w", p.Listen, err)
	}
	if f.publicURL != "" {
		if f.publicAddr != "" {
			return p, errors.New("--public-url and --public-address both set: the URL names the public host, drop --public-address")
		}
		u, err := parsePublicURL(f.publicURL, f.insecureListen != "")
		if err != nil {
			return p, err
		}
		if p.TLS && !u.tls {
			return p, fmt.Errorf("--public-url %s is http://, but this server serves TLS (--tls-cert-file): use https://", f.publicURL)
		}
		p.PublicHost, p.PublicPort, p.PublicTLS = u.host, u.port, u.tls
	}
	return p, nil
}

type publicURL struct {
	host string
	port int
	tls  bool
}

// parsePublicURL accepts https://HOST[:PORT], and http:// only for a
// loopback host or with --insecure-listen: nothing else (no path, query,
// user) because clients append their own paths and ports to it.
func parsePublicURL(s string, insecure bool) (publicURL, error) {
	bad := func(why string) (publicURL, error) {
		return publicURL{}, fmt.Errorf("--public-url %q: %s", s, why)
	}
	u, err := url.Parse(s)
	if err != nil {
		return bad(err.Error())
	}
	var out publicURL
	switch u.Scheme {
	case "https":
		out.tls, out.port = true, 443
	case "http":
		out.port = 80
	default:
		return bad("the scheme must be https:// (or http:// on loopback or with --insecure-listen)")
	}
	switch {
	case u.Host == "" || u.Hostname() == "":
		return bad("no host")
	case u.User != nil:
		return bad("user information is not allowed")
	case u.Path != "" && u.Path != "/":
		return bad("a path is not supported: serve the server at the root of its host")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return bad("a query or fragment is not allowed")
	}
	out.host = strings.ToLower(u.Hostname())
	if ps := u.Port(); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 {
			return bad("the port must be 1-65535")
		}
		out.port = n
	}
	if !out.tls && !insecure && !plainlisten.Loopback(out.host) {
		return bad("http:// for a non-loopback host sends everything in plaintext: use https://, or --insecure-listen to accept that")
	}
	return out, nil
}

// publicBase is the URL agents and browsers use: scheme://host[:port],
// the port left out when it is the scheme's default (the same builder as
// install.sh's), THIS_HOST when clients may use any of the host's names.
func publicBase(host string, port int, tls bool) string {
	if host == "" {
		host = "THIS_HOST"
	}
	return agentinstall.BaseURL(host, port, tls)
}

package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPlan: the listen, TLS and public-address flags together, as the
// server reads them; refusals name the setting at fault.
func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		f       listenFlags
		want    listenPlan
		wantErr string // substring; "" means success
	}{
		{name: "plaintext default stays on loopback", want: listenPlan{Listen: "127.0.0.1:33073"}},
		{name: "loopback listen", f: listenFlags{listen: "[::1]:9000"}, want: listenPlan{Listen: "[::1]:9000"}},
		{name: "localhost listen", f: listenFlags{listen: "localhost:9000"}, want: listenPlan{Listen: "localhost:9000"}},
		{name: "public plaintext refused", f: listenFlags{listen: ":33073"}, wantErr: "--insecure-listen :33073"},
		{name: "public plaintext refusal names TLS options", f: listenFlags{listen: "0.0.0.0:80"}, wantErr: "--domain NAME"},
		{name: "insecure listen", f: listenFlags{insecureListen: "0.0.0.0:33073"}, want: listenPlan{Listen: "0.0.0.0:33073", Insecure: true}},
		{name: "insecure listen on loopback is not insecure", f: listenFlags{insecureListen: "127.0.0.1:1"}, want: listenPlan{Listen: "127.0.0.1:1"}},
		{name: "listen and insecure listen", f: listenFlags{listen: ":1", insecureListen: ":2"}, wantErr: "--listen and --insecure-listen"},
		{name: "bad listen", f: listenFlags{listen: "nope"}, wantErr: `--listen "nope"`},
		{name: "cert files", f: listenFlags{certFile: "c", keyFile: "k"}, want: listenPlan{Listen: ":33073", TLS: true, PublicTLS: true}},
		{name: "cert without key", f: listenFlags{certFile: "c"}, wantErr: "--tls-cert-file needs --tls-key-file"},
		{name: "key without cert", f: listenFlags{keyFile: "k"}, wantErr: "--tls-key-file needs --tls-cert-file"},
		{name: "cert files and insecure", f: listenFlags{certFile: "c", keyFile: "k", insecureListen: ":1"}, wantErr: "--insecure-listen is plaintext, --tls-cert-file"},
		{name: "domain", f: listenFlags{domain: "VPN.example.com", acmeHTTPListen: ":80"},
			want: listenPlan{Listen: ":443", ACME: true, TLS: true, PublicHost: "vpn.example.com", PublicTLS: true}},
		{name: "domain on another port", f: listenFlags{domain: "vpn.example.com", listen: "127.0.0.1:8443"},
			want: listenPlan{Listen: "127.0.0.1:8443", ACME: true, TLS: true, PublicHost: "vpn.example.com", PublicTLS: true}},
		{name: "domain is an IP", f: listenFlags{domain: "203.0.113.7"}, wantErr: "--domain: invalid ACME setting: domain \"203.0.113.7\" is an IP address"},
		{name: "domain with scheme", f: listenFlags{domain: "https://vpn.example.com"}, wantErr: "--domain"},
		{name: "domain with cert files", f: listenFlags{domain: "vpn.example.com", certFile: "c", keyFile: "k"}, wantErr: "--domain obtains the certificate by ACME: drop --tls-cert-file"},
		{name: "domain with insecure", f: listenFlags{domain: "vpn.example.com", insecureListen: ":80"}, wantErr: "--insecure-listen is plaintext, --domain"},
		{name: "domain with public url", f: listenFlags{domain: "vpn.example.com", publicURL: "https://vpn.example.com"}, wantErr: "--public-url"},
		{name: "domain with other public address", f: listenFlags{domain: "vpn.example.com", publicAddr: "198.51.100.1"}, wantErr: "--public-address 198.51.100.1 differs"},
		{name: "domain with same public address", f: listenFlags{domain: "vpn.example.com", publicAddr: "vpn.example.com"},
			want: listenPlan{Listen: ":443", ACME: true, TLS: true, PublicHost: "vpn.example.com", PublicTLS: true}},
		{name: "bad acme http listen", f: listenFlags{domain: "vpn.example.com", acmeHTTPListen: "80"}, wantErr: "--acme-http-listen"},
		{name: "acme email without domain", f: listenFlags{acmeEmail: "a@b.c"}, wantErr: "--acme-email needs --domain"},
		{name: "acme ca without domain", f: listenFlags{acmeCAFile: "x"}, wantErr: "--acme-ca-file needs --domain"},
		{name: "acme directory without domain", f: listenFlags{acmeDirChanged: true}, wantErr: "--acme-directory needs --domain"},
		{name: "acme http listen without domain", f: listenFlags{acmeHTTPChanged: true}, wantErr: "--acme-http-listen needs --domain"},
		{name: "public url behind a proxy", f: listenFlags{publicURL: "https://vpn.example.com"},
			want: listenPlan{Listen: "127.0.0.1:33073", PublicHost: "vpn.example.com", PublicPort: 443, PublicTLS: true}},
		{name: "public url with port and slash", f: listenFlags{publicURL: "https://VPN.example.com:8443/", listen: "127.0.0.1:8080"},
			want: listenPlan{Listen: "127.0.0.1:8080", PublicHost: "vpn.example.com", PublicPort: 8443, PublicTLS: true}},
		{name: "public url with path", f: listenFlags{publicURL: "https://vpn.example.com/netbird"}, wantErr: "a path is not supported"},
		{name: "public url with query", f: listenFlags{publicURL: "https://vpn.example.com/?a=1"}, wantErr: "query"},
		{name: "public url with user", f: listenFlags{publicURL: "https://u:p@vpn.example.com"}, wantErr: "user"},
		{name: "public url bad scheme", f: listenFlags{publicURL: "grpc://vpn.example.com"}, wantErr: "the scheme must be https://"},
		{name: "public url bare host", f: listenFlags{publicURL: "vpn.example.com"}, wantErr: "--public-url"},
		{name: "public url bad port", f: listenFlags{publicURL: "https://vpn.example.com:0"}, wantErr: "port"},
		{name: "public url http public host", f: listenFlags{publicURL: "http://vpn.example.com"}, wantErr: "plaintext"},
		{name: "public url http loopback", f: listenFlags{publicURL: "http://127.0.0.1:8080"},
			want: listenPlan{Listen: "127.0.0.1:33073", PublicHost: "127.0.0.1", PublicPort: 8080}},
		{name: "public url http with insecure listen", f: listenFlags{publicURL: "http://vpn.example.com", insecureListen: ":33073"},
			want: listenPlan{Listen: ":33073", Insecure: true, PublicHost: "vpn.example.com", PublicPort: 80}},
		{name: "public url with public address", f: listenFlags{publicURL: "https://a.example.com", publicAddr: "a.example.com"}, wantErr: "--public-url and --public-address"},
		{name: "public url http with cert files", f: listenFlags{publicURL: "http://127.0.0.1", certFile: "c", keyFile: "k"}, wantErr: "use https://"},
		{name: "public url https with cert files", f: listenFlags{publicURL: "https://vpn.example.com", certFile: "c", keyFile: "k"},
			want: listenPlan{Listen: ":33073", TLS: true, PublicHost: "vpn.example.com", PublicPort: 443, PublicTLS: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := plan(tc.f)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPublicBase(t *testing.T) {
	for _, tc := range []struct {
		host string
		port int
		tls  bool
		want string
	}{
		{"vpn.example.com", 443, true, "https://vpn.example.com"},
		{"vpn.example.com", 8443, true, "https://vpn.example.com:8443"},
		{"127.0.0.1", 80, false, "http://127.0.0.1"},
		{"::1", 33073, false, "http://[::1]:33073"},
		{"", 33073, false, "http://THIS_HOST:33073"},
	} {
		if got := publicBase(tc.host, tc.port, tc.tls); got != tc.want {
			t.Errorf("publicBase(%q, %d, %v) = %q, want %q", tc.host, tc.port, tc.tls, got, tc.want)
		}
	}
}

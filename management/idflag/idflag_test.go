package idflag

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/wiremesh/wiremesh/management/users"
)

// TestAccountDomains: --account-domains (or NB_ACCOUNT_DOMAINS) lists the
// domains whose verified users share an account; it needs domain mode and
// refuses what is not a domain.
func TestAccountDomains(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     string
		args    []string
		want    []string
		wantErr bool
	}{
		{name: "flag", args: []string{"--account-mode", "domain", "--account-domains", "Corp.Example.,b.example", "--builtin-idp=false"}, want: []string{"corp.example", "b.example"}},
		{name: "env", env: "corp.example, x.example", args: []string{"--account-mode", "domain", "--builtin-idp=false"}, want: []string{"corp.example", "x.example"}},
		{name: "none", args: []string{"--account-mode", "domain", "--builtin-idp=false"}, want: []string{}},
		{name: "single mode", args: []string{"--account-domains", "corp.example", "--builtin-idp=false"}, wantErr: true},
		{name: "not a domain", args: []string{"--account-mode", "domain", "--account-domains", "a@corp.example", "--builtin-idp=false"}, wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("NB_ACCOUNT_DOMAINS", c.env)
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			f := Bind(fs, true)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			id, err := f.Identity("", 0, false)
			if (err != nil) != c.wantErr {
				t.Fatalf("error %v, want error: %v", err, c.wantErr)
			}
			if err == nil && (!slices.Equal(id.AccountDomains, c.want) || id.Mode != users.DomainAccounts) {
				t.Fatalf("domains %q (mode %s), want %q", id.AccountDomains, id.Mode, c.want)
			}
		})
	}
}

// TestDashboardClientID: --dashboard-client-id names the dashboard's
// client at an external provider; the built-in provider has its own.
func TestDashboardClientID(t *testing.T) {
	parse := func(args ...string) (*Flags, error) {
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		f := Bind(fs, true)
		return f, fs.Parse(args)
	}
	f, err := parse("--oidc-issuer", "https://idp.example.com", "--oidc-client-id", "agents", "--dashboard-client-id", "dash")
	if err != nil {
		t.Fatal(err)
	}
	id, err := f.Identity("", 0, false)
	if err != nil || id.DashboardClientID != "dash" || id.ClientID != "agents" {
		t.Fatalf("%+v %v", id, err)
	}
	f, _ = parse("--dashboard-client-id", "dash", "--idp-issuer", "https://vpn.example.com/oauth2")
	if _, err := f.Identity("", 0, false); err == nil || !strings.Contains(err.Error(), "--oidc-issuer") {
		t.Fatalf("built-in provider with --dashboard-client-id: %v", err)
	}
}

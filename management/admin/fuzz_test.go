package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// FuzzImport feeds arbitrary files to what `admin import` runs (readDump,
// then importDump on one store): whatever arrives, it returns (no panic),
// an import that fails leaves the store as it was (all or nothing), and
// what it imports has settings in range.
func FuzzImport(f *testing.F) {
	dir := f.TempDir()
	c := store.Config{Engine: store.SQLite, DataDir: dir}
	// A real export of an account with a setup key is the main seed.
	if _, err := runCmd(c, "setup-keys", "create", "--name", "ci", "--reusable"); err != nil {
		f.Fatal(err)
	}
	dump := filepath.Join(f.TempDir(), "dump.json")
	if _, err := runCmd(c, "export", "-o", dump); err != nil {
		f.Fatal(err)
	}
	exported, err := os.ReadFile(dump)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(exported)
	// The same account with a local user and its password login, and with
	// a login of someone who is not a user of the dump (refused).
	var d store.Dump
	if err := json.Unmarshal(exported, &d); err != nil {
		f.Fatal(err)
	}
	now := time.Now().UTC()
	d.Users = append(d.Users, account.User{ID: "u-local", AccountID: d.Account.ID, Email: "local@example.com", Name: "Local", Role: account.RoleAdmin, Issued: "api", CreatedAt: now})
	d.Credentials = []account.Credential{{Subject: "u-local", Email: "local@example.com", Name: "Local", PasswordHash: "$2a$10$abcdefghijklmnopqrstuv", CreatedAt: now}}
	d.TOTPFactors = []store.TOTPFactor{{Subject: "u-local", Secret: "sealed", Confirmed: true, Recovery: []string{"h"}, CreatedAt: now}}
	d.IdentityProviders = []store.IdentityProvider{{ID: "idp-1", AccountID: d.Account.ID, Type: "oidc", Name: "Corp", Issuer: "https://idp.example.com", ClientID: "c", ClientSecret: "sealed", CreatedAt: now}}
	d.IdPLinks = []store.IdPLinkEntry{{ProviderID: "idp-1", UpstreamSubject: "up-1", UserID: "u-local"}}
	withLogin, _ := json.Marshal(d)
	f.Add(withLogin)
	d.Credentials[0].Subject = "not-a-user"
	stranger, _ := json.Marshal(d)
	f.Add(stranger)
	st, err := store.Open(context.Background(), c)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	accounts := func(t *testing.T) int {
		var n int
		err := st.Read(context.Background(), func(tx *store.Tx) error {
			accs, err := tx.Accounts(context.Background())
			n = len(accs)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		before := accounts(t)
		d, err := readDump(bytes.NewReader(data))
		if err == nil {
			err = importDump(context.Background(), st, d)
		}
		after := accounts(t)
		if err != nil && after != before {
			t.Fatalf("a failed import (%v) changed the number of accounts from %d to %d", err, before, after)
		}
		if err == nil && after != before+1 {
			t.Fatalf("a successful import made %d accounts of %d", after, before)
		}
		if err == nil {
			err := st.Read(context.Background(), func(tx *store.Tx) error {
				accs, err := tx.Accounts(context.Background())
				for _, a := range accs {
					if verr := a.Settings.Validate(); verr != nil {
						t.Errorf("imported account %s: %v", a.ID, verr)
					}
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}

func runCmd(c store.Config, args ...string) (string, error) {
	cmd := Command("/nonexistent")
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append(storeArgs(c), args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

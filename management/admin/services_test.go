package admin

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/management/access"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/tenant"
)

// openTest opens the store the commands work on, with the default account.
func openTest(t *testing.T, c store.Config) (*store.Store, account.ID) {
	t.Helper()
	st, err := store.Open(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	acc, err := tenant.Default(context.Background(), st, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return st, acc.ID
}

func countKeys(t *testing.T, st *store.Store, acc account.ID) int {
	t.Helper()
	var ks []account.SetupKey
	if err := st.Read(context.Background(), func(tx *store.Tx) (err error) { ks, err = tx.In(acc).SetupKeys(context.Background()); return }); err != nil {
		t.Fatal(err)
	}
	return len(ks)
}

func newestEvent(t *testing.T, st *store.Store, acc account.ID) account.Event {
	t.Helper()
	var evs []account.Event
	if err := st.Read(context.Background(), func(tx *store.Tx) (err error) { evs, err = tx.In(acc).Events(context.Background(), 1); return }); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Fatalf("%d events", len(evs))
	}
	return evs[0]
}

func serial(t *testing.T, st *store.Store, acc account.ID) uint64 {
	t.Helper()
	var s map[account.ID]uint64
	if err := st.Read(context.Background(), func(tx *store.Tx) (err error) { s, err = tx.Serials(context.Background()); return }); err != nil {
		t.Fatal(err)
	}
	return s[acc]
}

// The admin command writes through the services the REST API calls: an
// invalid write is refused with the service's error (the one the API turns
// into its 422 message), nothing is stored, and a valid one records the
// same activity as the API's.
func TestAdminWritesGoThroughServices(t *testing.T) {
	c := store.Config{Engine: store.SQLite, DataDir: t.TempDir()}
	st, acc := openTest(t, c)
	svc := access.New(st, offline{}, nil) // what the API's handlers call

	// An auto-group that does not exist: the CLI used to store the key.
	_, cliErr := run(t, c, "setup-keys", "create", "--name", "k", "--auto-groups", "nope")
	_, _, apiErr := svc.CreateSetupKey(context.Background(), acc, setupkey.Options{Name: "k", AutoGroups: []string{"nope"}}, "user-1")
	if cliErr == nil || apiErr == nil || !errors.Is(cliErr, access.ErrInvalid) || !strings.HasSuffix(cliErr.Error(), apiErr.Error()) {
		t.Fatalf("unknown auto-group: CLI %v, API %v", cliErr, apiErr)
	}
	// An expiry past 365 days.
	_, cliErr = run(t, c, "setup-keys", "create", "--name", "k", "--expires-in", "8761h")
	if cliErr == nil || !errors.Is(cliErr, access.ErrInvalid) || !strings.Contains(cliErr.Error(), "longer than 8760h") {
		t.Fatalf("expiry past 365 days: %v", cliErr)
	}
	if _, cliErr = run(t, c, "setup-keys", "create", "--name", " "); !errors.Is(cliErr, access.ErrInvalid) {
		t.Fatalf("blank name: %v", cliErr)
	}
	if n := countKeys(t, st, acc); n != 0 {
		t.Fatalf("refused creations stored %d keys", n)
	}

	// Valid: a group by name, then a key with it as auto-group.
	before := serial(t, st, acc)
	mustRun(t, c, "groups", "create", "ops")
	if after := serial(t, st, acc); after <= before {
		t.Fatalf("group create left the serial at %d (was %d): a running server would not see it", after, before)
	}
	g, err := findGroup(context.Background(), st, acc, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if ev := newestEvent(t, st, acc); ev.Activity != "group.add" || ev.Target != string(g.ID) || ev.Initiator != initiator {
		t.Fatalf("group event %+v", ev)
	}
	mustRun(t, c, "setup-keys", "create", "--name", "k", "--auto-groups", "ops")
	cliEv := newestEvent(t, st, acc)
	k, _, err := svc.CreateSetupKey(context.Background(), acc, setupkey.Options{Name: "k", AutoGroups: []string{string(g.ID)}}, "user-1")
	if err != nil {
		t.Fatal(err)
	}
	apiEv := newestEvent(t, st, acc)
	if apiEv.Target != string(k.ID) || cliEv.Initiator != initiator || apiEv.Initiator != "user-1" {
		t.Fatalf("events: CLI %+v, API %+v", cliEv, apiEv)
	}
	norm := func(e account.Event) account.Event {
		e.ID, e.At, e.Target, e.Initiator = 0, time.Time{}, "", ""
		return e
	}
	if d := cmp.Diff(norm(apiEv), norm(cliEv)); d != "" {
		t.Fatalf("the CLI's event differs from the API's (-api +cli):\n%s", d)
	}

	// The group is now in use by setup keys: the service refuses to delete
	// it (the CLI used to check policies only).
	if _, err := run(t, c, "groups", "delete", "ops"); !errors.Is(err, access.ErrInUse) {
		t.Fatalf("delete of a group a setup key names: %v", err)
	}
	// Group and policy validation are the service's.
	if _, err := run(t, c, "groups", "add-peers", "ops", "no-such-peer"); !errors.Is(err, access.ErrInvalid) || !strings.Contains(err.Error(), `peer "no-such-peer" does not exist`) {
		t.Fatalf("add of an unknown peer: %v", err)
	}
	if _, err := run(t, c, "groups", "create", "All"); !errors.Is(err, access.ErrInvalid) {
		t.Fatalf("a second All group: %v", err)
	}
	if _, err := run(t, c, "policies", "create", "--name", "p", "--source", "ops", "--destination", "missing"); !errors.Is(err, access.ErrInvalid) || !strings.Contains(err.Error(), `group "missing" does not exist`) {
		t.Fatalf("policy naming an unknown group: %v", err)
	}
	if _, err := run(t, c, "policies", "create", "--name", "p", "--source", "ops", "--destination", "ops", "--protocol", "sctp"); !errors.Is(err, access.ErrInvalid) {
		t.Fatalf("policy with an unknown protocol: %v", err)
	}
	out := mustRun(t, c, "policies", "create", "--name", "ssh", "--source", "ops", "--destination", "All", "--protocol", "tcp", "--ports", "22")
	id := strings.TrimSuffix(out[strings.LastIndex(out, "id ")+3:], ").\n")
	mustRun(t, c, "policies", "disable", id)
	if ev := newestEvent(t, st, acc); ev.Activity != "policy.update" || ev.Target != id || ev.Meta["name"] != "ssh" {
		t.Fatalf("policy disable event %+v", ev)
	}
	mustRun(t, c, "setup-keys", "revoke", string(k.ID))
	if ev := newestEvent(t, st, acc); ev.Activity != "setupkey.revoke" || ev.Target != string(k.ID) || ev.Initiator != initiator {
		t.Fatalf("revoke event %+v", ev)
	}
}

// Import checks the dump as the services check each object: a policy that
// names a group the dump does not hold is refused and nothing is imported.
func TestImportValidatesObjects(t *testing.T) {
	c := store.Config{Engine: store.SQLite, DataDir: t.TempDir()}
	mustRun(t, c, "groups", "create", "ops")
	mustRun(t, c, "setup-keys", "create", "--name", "k", "--auto-groups", "ops")
	file := filepath.Join(t.TempDir(), "dump.json")
	mustRun(t, c, "export", "-o", file)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var good store.Dump
	if err := json.Unmarshal(b, &good); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(d *store.Dump){
		"policy names a missing group": func(d *store.Dump) { d.Policies[0].Rules[0].Sources = []account.GroupID{"gone"} },
		"key names a missing group":    func(d *store.Dump) { d.SetupKeys[0].AutoGroups = []string{"gone"} },
		"group holds a missing peer":   func(d *store.Dump) { d.Groups[0].Peers = []account.PeerID{"gone"} },
		"rule with a bad protocol":     func(d *store.Dump) { d.Policies[0].Rules[0].Protocol = "sctp" },
		"key valid for two years":      func(d *store.Dump) { d.SetupKeys[0].ExpiresAt = d.SetupKeys[0].CreatedAt.AddDate(2, 0, 0) },
		"route names a missing group": func(d *store.Dump) {
			d.Routes = []account.Route{{ID: "r", AccountID: d.Account.ID, NetID: "n", PeerGroups: []account.GroupID{d.Groups[0].ID}, Groups: []account.GroupID{"gone"}, Metric: 1}}
		},
		"resource of a missing network": func(d *store.Dump) {
			d.NetworkResources = []account.NetworkResource{{ID: "res", AccountID: d.Account.ID, NetworkID: "gone", Name: "x", Type: account.ResourceDomain, Address: "a.example", Domain: "a.example"}}
		},
		"rule names a missing resource": func(d *store.Dump) {
			d.Policies[0].Rules[0].Destinations, d.Policies[0].Rules[0].DestinationResource = nil, "gone"
		},
	}
	other := store.Config{Engine: store.SQLite, DataDir: t.TempDir()}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			var d store.Dump
			_ = json.Unmarshal(b, &d)
			mutate(&d)
			f := filepath.Join(t.TempDir(), "bad.json")
			nb, _ := json.Marshal(d)
			if err := os.WriteFile(f, nb, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := run(t, other, "import", f); !errors.Is(err, access.ErrInvalid) || !strings.Contains(err.Error(), "nothing was imported") {
				t.Fatalf("import: %v", err)
			}
			if _, err := run(t, other, "--account", string(d.Account.ID), "peers", "list"); err == nil {
				// The account must not exist: listing it fails or is empty.
				st, _ := store.Open(context.Background(), other)
				defer st.Close()
				var serials map[account.ID]uint64
				_ = st.Read(context.Background(), func(tx *store.Tx) (err error) { serials, err = tx.Serials(context.Background()); return })
				if _, ok := serials[d.Account.ID]; ok {
					t.Fatal("a refused import left the account behind")
				}
			}
		})
	}
	mustRun(t, other, "import", file)
}

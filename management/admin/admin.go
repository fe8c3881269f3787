// Package admin is the local administration command (`netbird-mgmt admin`,
// `netbird-server admin`): it works on the store, on either engine, without
// a browser or a running server, Headscale-style.
//
// Every write goes through the same domain services as the REST API
// (access for setup keys, groups and policies; peers for peers), so it is
// validated, refused and logged in the activity log exactly as an API call
// would be, with "admin-cli" as the initiator. Reads (listings, events,
// export) go straight to the store. Import is a restore: it recreates a
// whole account at store level, after checking the dump the way the
// services check each object (see validateDump). Creating an account uses
// the same tenant.Create as a first login.
//
// This command runs in its own process, so it has no streams to notify:
// the services bump the account's serial in the change's transaction, and
// a running server sees it (Postgres: the store's change notifications;
// SQLite: its serial poll) and pushes new maps within a second.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/management/access"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storeflag"
	"github.com/wiremesh/wiremesh/management/tenant"
)

// initiator is how the activity log names changes made here.
const initiator = "admin-cli"

// defaultKeyName names setup keys created without --name (the API requires
// a name; scripts written before it was required keep working).
const defaultKeyName = "admin-cli"

// accessService is the service the REST API changes setup keys, groups
// and policies through. Its notifier is offline: the serial bump in each
// change's transaction is what reaches a running server.
func accessService(st *store.Store) *access.Service {
	return access.New(st, offline{}, slog.New(slog.DiscardHandler))
}

// env is where the store selection reads its environment.
type env struct {
	dir     string
	account string
	flags   *storeflag.Flags
}

func (e *env) open(ctx context.Context) (*store.Store, error) {
	c, err := e.flags.Config(e.dir, os.Getenv)
	if err != nil {
		return nil, err
	}
	if err := CheckDataDir(c); err != nil {
		return nil, err
	}
	return store.Open(ctx, c)
}

// accountID is --account, or the default account.
func (e *env) accountID(ctx context.Context, st *store.Store) (account.ID, error) {
	if e.account != "" {
		return account.ID(e.account), nil
	}
	acc, err := tenant.Default(ctx, st, time.Now())
	return acc.ID, err
}

// job is an admin action on an open store and the selected account.
type job func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error

func (e *env) run(fn job) func(*cobra.Command, []string) error {
	return e.runStore(func(ctx context.Context, st *store.Store, out io.Writer) error {
		acc, err := e.accountID(ctx, st)
		if err != nil {
			return err
		}
		return fn(ctx, st, acc, out)
	})
}

// runStore runs an admin action on the open store, whatever the account.
func (e *env) runStore(fn func(ctx context.Context, st *store.Store, out io.Writer) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		st, err := e.open(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		return fn(ctx, st, cmd.OutOrStdout())
	}
}

// Command returns the admin command tree. defaultDir is the --datadir default.
func Command(defaultDir string) *cobra.Command {
	e := &env{}
	root := &cobra.Command{
		Use:   "admin",
		Short: "Administer the management store directly (setup keys, peers, export/import, backup)",
	}
	pf := root.PersistentFlags()
	pf.StringVar(&e.dir, "datadir", defaultDir, "management data directory (the sqlite store lives here)")
	pf.StringVar(&e.account, "account", "", "account ID to work on (default: the install's default account)")
	e.flags = storeflag.Bind(pf)
	root.AddCommand(setupKeysCommand(e), accountsCommand(e), peersCommand(e), groupsCommand(e), policiesCommand(e), eventsCommand(e), exportCommand(e), importCommand(e), backupCommand(e))
	return root
}

// MigrateCommand applies pending schema migrations and reports them, for
// upgrades run ahead of starting the new version.
func MigrateCommand(defaultDir string) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending store schema migrations (management also applies them on start)",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVar(&dir, "datadir", defaultDir, "management data directory (the sqlite store lives here)")
	flags := storeflag.Bind(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := flags.Config(dir, os.Getenv)
		if err != nil {
			return err
		}
		if err := CheckDataDir(c); err != nil {
			return err
		}
		ctx := cmd.Context()
		st, err := store.OpenNoMigrate(ctx, c)
		if err != nil {
			return err
		}
		defer st.Close()
		applied, err := st.MigrateReport(ctx)
		for _, m := range applied {
			fmt.Fprintf(cmd.OutOrStdout(), "applied %04d_%s\n", m.Version, m.Name)
		}
		if err != nil {
			return err
		}
		v, err := st.SchemaVersion(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s store at schema version %d\n", st.Engine(), v)
		return nil
	}
	return cmd
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func setupKeysCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "setup-keys", Aliases: []string{"setup-key", "keys"}, Short: "Create, list and revoke setup keys"}

	var opts setupkey.Options
	var groups string
	var expires time.Duration
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a setup key; the key itself is the last line of output and is shown only once",
		Args:  cobra.NoArgs,
	}
	create.Flags().StringVar(&opts.Name, "name", defaultKeyName, "name shown in listings")
	create.Flags().BoolVar(&opts.Reusable, "reusable", false, "allow more than one peer to register with the key")
	create.Flags().IntVar(&opts.UsageLimit, "usage-limit", 0, "maximum registrations for a reusable key (0 = unlimited)")
	create.Flags().DurationVar(&expires, "expires-in", setupkey.DefaultExpiry, "validity period (e.g. 24h); 0 = never expires")
	create.Flags().BoolVar(&opts.Ephemeral, "ephemeral", false, "peers registered with it are removed when offline for 10 minutes")
	create.Flags().StringVar(&groups, "auto-groups", "", "comma-separated groups given to peers registered with the key")
	create.RunE = func(cmd *cobra.Command, args []string) error {
		if opts.UsageLimit < 0 {
			return errors.New("--usage-limit cannot be negative")
		}
		if opts.UsageLimit != 0 && !opts.Reusable {
			return errors.New("--usage-limit needs --reusable (a one-off key is used once)")
		}
		opts.Expiry = expires
		if expires == 0 {
			opts.Expiry = -1
		}
		for _, g := range strings.Split(groups, ",") {
			if g = strings.TrimSpace(g); g != "" {
				opts.AutoGroups = append(opts.AutoGroups, g)
			}
		}
		return e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
			o := opts
			// The API takes group IDs; here a name does as well.
			var err error
			if o.AutoGroups, err = groupIDs(ctx, st, acc, o.AutoGroups); err != nil {
				return err
			}
			k, secret, err := accessService(st).CreateSetupKey(ctx, acc, o, initiator)
			if err != nil {
				return fmt.Errorf("create setup key: %w", err)
			}
			fmt.Fprintf(out, "Created %s setup key %q (id %s), %s.\n", keyType(k), k.Name, k.ID, expiryText(k))
			fmt.Fprintln(out, "Store it now: it is not shown again. Use it with: netbird up --setup-key KEY --management-url URL")
			fmt.Fprintln(out, secret)
			return nil
		})(cmd, args)
	}

	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List setup keys (secrets are never shown, only their first characters)",
		Args:  cobra.NoArgs,
		RunE: e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
			var keys []account.SetupKey
			if err := st.Read(ctx, func(tx *store.Tx) error {
				var err error
				keys, err = tx.In(acc).SetupKeys(ctx)
				return err
			}); err != nil {
				return err
			}
			now := time.Now()
			if asJSON {
				return printJSON(out, setupKeyViews(keys, now))
			}
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tKEY\tTYPE\tSTATE\tUSED\tLIMIT\tEXPIRES\tEPHEMERAL\tGROUPS")
			for _, v := range setupKeyViews(keys, now) {
				limit := "unlimited"
				if v.UsageLimit > 0 {
					limit = fmt.Sprint(v.UsageLimit)
				}
				exp := "never"
				if v.ExpiresAt != nil {
					exp = v.ExpiresAt.Format(time.RFC3339)
				}
				fmt.Fprintf(w, "%s\t%s\t%s****\t%s\t%s\t%d\t%s\t%s\t%v\t%s\n", v.ID, v.Name, v.Key, v.Type, v.State, v.UsedTimes, limit, exp, v.Ephemeral, strings.Join(v.AutoGroups, ","))
			}
			return w.Flush()
		}),
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")

	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a setup key so it registers no more peers (registered peers stay)",
		Args:  cobra.ExactArgs(1),
	}
	revoke.RunE = func(cmd *cobra.Command, args []string) error {
		return e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
			// Revoking is the API's update with revoked set and the
			// auto-groups kept as they are.
			id := account.SetupKeyID(args[0])
			var k account.SetupKey
			err := st.Read(ctx, func(tx *store.Tx) (err error) { k, err = tx.In(acc).SetupKey(ctx, id); return })
			if err == nil {
				_, err = accessService(st).UpdateSetupKey(ctx, acc, id, true, append([]string{}, k.AutoGroups...), initiator)
			}
			if errors.Is(err, store.ErrNotFound) || errors.Is(err, access.ErrNotFound) {
				return fmt.Errorf("no setup key with id %q in account %s (see: admin setup-keys list)", args[0], acc)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "Revoked setup key %s.\n", args[0])
			return nil
		})(cmd, args)
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// setupKeyView is a setup key as listings show it.
type setupKeyView struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Key        string     `json:"key"` // the first characters only
	Type       string     `json:"type"`
	State      string     `json:"state"`
	UsedTimes  int        `json:"used_times"`
	UsageLimit int        `json:"usage_limit"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsed   *time.Time `json:"last_used"`
	Revoked    bool       `json:"revoked"`
	Ephemeral  bool       `json:"ephemeral"`
	AutoGroups []string   `json:"auto_groups"`
	CreatedAt  time.Time  `json:"created_at"`
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func setupKeyViews(keys []account.SetupKey, now time.Time) []setupKeyView {
	out := make([]setupKeyView, 0, len(keys))
	for _, k := range keys {
		limit := k.UsageLimit
		if !k.Reusable {
			limit = 1
		}
		groups := k.AutoGroups
		if groups == nil {
			groups = []string{}
		}
		out = append(out, setupKeyView{ID: string(k.ID), Name: k.Name, Key: k.Prefix, Type: keyType(k), State: setupkey.State(k, now),
			UsedTimes: k.UsedTimes, UsageLimit: limit, ExpiresAt: optTime(k.ExpiresAt), LastUsed: optTime(k.LastUsed),
			Revoked: k.Revoked, Ephemeral: k.Ephemeral, AutoGroups: groups, CreatedAt: k.CreatedAt})
	}
	return out
}

func keyType(k account.SetupKey) string {
	if k.Reusable {
		return "reusable"
	}
	return "one-off"
}

func expiryText(k account.SetupKey) string {
	if k.ExpiresAt.IsZero() {
		return "never expires"
	}
	return "expires " + k.ExpiresAt.Format(time.RFC3339)
}

// Package admin is the local administration command (`netbird-mgmt admin`):
// it works on the store directly, without a browser or a running server,
// Headscale-style. A running server picks its changes up within a second.
package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/tenant"
)

// Command returns the admin command tree. defaultDir is the --datadir default.
func Command(defaultDir string) *cobra.Command {
	var dir string
	root := &cobra.Command{
		Use:   "admin",
		Short: "Administer the management store directly (setup keys, peers)",
	}
	root.PersistentFlags().StringVar(&dir, "datadir", defaultDir, "management data directory")
	withStore := func(fn func(ctx context.Context, st *store.Store, out io.Writer) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error {
			st, err := store.OpenSQLite(cmd.Context(), dir)
			if err != nil {
				return err
			}
			defer st.Close()
			return fn(cmd.Context(), st, cmd.OutOrStdout())
		}
	}
	root.AddCommand(setupKeysCommand(withStore), peersCommand(withStore))
	return root
}

type storeRunner func(fn func(ctx context.Context, st *store.Store, out io.Writer) error) func(*cobra.Command, []string) error

func setupKeysCommand(withStore storeRunner) *cobra.Command {
	cmd := &cobra.Command{Use: "setup-keys", Aliases: []string{"setup-key", "keys"}, Short: "Create, list and revoke setup keys"}

	var opts setupkey.Options
	var groups string
	var expires time.Duration
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a setup key; the key itself is the last line of output and is shown only once",
		Args:  cobra.NoArgs,
	}
	create.Flags().StringVar(&opts.Name, "name", "", "name shown in listings")
	create.Flags().BoolVar(&opts.Reusable, "reusable", false, "allow more than one peer to register with the key")
	create.Flags().IntVar(&opts.UsageLimit, "usage-limit", 0, "maximum registrations for a reusable key (0 = unlimited)")
	create.Flags().DurationVar(&expires, "expires-in", setupkey.DefaultExpiry, "validity period (e.g. 24h); 0 = never expires")
	create.Flags().BoolVar(&opts.Ephemeral, "ephemeral", false, "peers registered with it are removed when offline for 10 minutes")
	create.Flags().StringVar(&groups, "auto-groups", "", "comma-separated groups given to peers registered with the key")
	create.RunE = func(cmd *cobra.Command, args []string) error {
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
		return withStore(func(ctx context.Context, st *store.Store, out io.Writer) error {
			acc, err := tenant.Default(ctx, st, time.Now())
			if err != nil {
				return err
			}
			k, secret, err := setupkey.New(acc.ID, opts, time.Now().UTC())
			if err != nil {
				return err
			}
			if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.InsertSetupKey(ctx, k) }); err != nil {
				return fmt.Errorf("save setup key: %w", err)
			}
			kind := "one-off"
			if k.Reusable {
				kind = "reusable"
			}
			fmt.Fprintf(out, "Created %s setup key %q (id %s), %s.\n", kind, k.Name, k.ID, expiryText(k))
			fmt.Fprintln(out, "Store it now: it is not shown again. Use it with: netbird up --setup-key KEY --management-url URL")
			fmt.Fprintln(out, secret)
			return nil
		})(cmd, args)
	}

	list := &cobra.Command{
		Use:   "list",
		Short: "List setup keys (secrets are never shown)",
		Args:  cobra.NoArgs,
		RunE: withStore(func(ctx context.Context, st *store.Store, out io.Writer) error {
			acc, err := tenant.Default(ctx, st, time.Now())
			if err != nil {
				return err
			}
			var keys []account.SetupKey
			if err := st.Read(ctx, func(tx *store.Tx) error {
				keys, err = tx.SetupKeys(ctx, acc.ID)
				return err
			}); err != nil {
				return err
			}
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tKEY\tTYPE\tSTATE\tUSED\tLIMIT\tEXPIRES\tEPHEMERAL\tGROUPS")
			now := time.Now()
			for _, k := range keys {
				kind, limit := "one-off", "1"
				if k.Reusable {
					kind, limit = "reusable", "unlimited"
					if k.UsageLimit > 0 {
						limit = fmt.Sprint(k.UsageLimit)
					}
				}
				exp := "never"
				if !k.ExpiresAt.IsZero() {
					exp = k.ExpiresAt.Format(time.RFC3339)
				}
				fmt.Fprintf(w, "%s\t%s\t%s****\t%s\t%s\t%d\t%s\t%s\t%v\t%s\n", k.ID, k.Name, k.Prefix, kind, setupkey.State(k, now), k.UsedTimes, limit, exp, k.Ephemeral, strings.Join(k.AutoGroups, ","))
			}
			return w.Flush()
		}),
	}

	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a setup key so it registers no more peers (registered peers stay)",
		Args:  cobra.ExactArgs(1),
	}
	revoke.RunE = func(cmd *cobra.Command, args []string) error {
		return withStore(func(ctx context.Context, st *store.Store, out io.Writer) error {
			err := st.Tx(ctx, func(tx *store.Tx) error { return tx.RevokeSetupKey(ctx, account.SetupKeyID(args[0])) })
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no setup key with id %q (see: admin setup-keys list)", args[0])
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

func expiryText(k account.SetupKey) string {
	if k.ExpiresAt.IsZero() {
		return "never expires"
	}
	return "expires " + k.ExpiresAt.Format(time.RFC3339)
}

func peersCommand(withStore storeRunner) *cobra.Command {
	cmd := &cobra.Command{Use: "peers", Short: "List and delete peers"}
	list := &cobra.Command{
		Use:   "list",
		Short: "List registered peers",
		Args:  cobra.NoArgs,
		RunE: withStore(func(ctx context.Context, st *store.Store, out io.Writer) error {
			acc, err := tenant.Default(ctx, st, time.Now())
			if err != nil {
				return err
			}
			var ps []account.Peer
			if err := st.Read(ctx, func(tx *store.Tx) error {
				ps, err = tx.Peers(ctx, acc.ID)
				return err
			}); err != nil {
				return err
			}
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tIP\tFQDN\tCONNECTED\tLAST SEEN\tKEY")
			for _, p := range ps {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%v\t%s\t%s\n", p.ID, p.Name, p.IP, p.FQDN(acc.Domain), p.Connected, p.LastSeen.Format(time.RFC3339), p.Key)
			}
			return w.Flush()
		}),
	}
	del := &cobra.Command{Use: "delete ID", Short: "Delete a peer; it drops off every other peer's map", Args: cobra.ExactArgs(1)}
	del.RunE = func(cmd *cobra.Command, args []string) error {
		return withStore(func(ctx context.Context, st *store.Store, out io.Writer) error {
			// A running server sees the serial move and updates its peers.
			err := peers.New(st, offline{}, slog.New(slog.DiscardHandler), nil).Delete(ctx, account.PeerID(args[0]))
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no peer with id %q (see: admin peers list)", args[0])
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "Deleted peer %s.\n", args[0])
			return nil
		})(cmd, args)
	}
	cmd.AddCommand(list, del)
	return cmd
}

// offline is the notifier of a process without streams: the server's store
// watcher delivers the change instead.
type offline struct{}

func (offline) AccountChanged(account.ID) {}

package admin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/tenant"
)

// accountsCommand creates and lists accounts (tenants). Users logging in
// get theirs by the account mode; this is for setup-key-only installs and
// load tests that want several.
func accountsCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "accounts", Aliases: []string{"account"}, Short: "Create and list accounts (each with its own peers, groups and policies)"}
	create := &cobra.Command{Use: "create", Short: "Create an account besides the default one, with the All group and the default policy; prints its ID (use it with --account)", Args: cobra.NoArgs,
		RunE: e.runStore(func(ctx context.Context, st *store.Store, out io.Writer) error {
			// The oldest account is the default one: make sure it exists,
			// so the new account is never taken for it.
			if _, err := tenant.Default(ctx, st, time.Now()); err != nil {
				return err
			}
			var acc account.Account
			if err := st.Tx(ctx, func(tx *store.Tx) (err error) { acc, err = tenant.Create(ctx, tx, time.Now()); return }); err != nil {
				return err
			}
			fmt.Fprintln(out, acc.ID)
			return nil
		})}
	list := &cobra.Command{Use: "list", Short: "List account IDs with their network serials", Args: cobra.NoArgs,
		RunE: e.runStore(func(ctx context.Context, st *store.Store, out io.Writer) error {
			var serials map[account.ID]uint64
			if err := st.Read(ctx, func(tx *store.Tx) (err error) { serials, err = tx.Serials(ctx); return }); err != nil {
				return err
			}
			ids := make([]account.ID, 0, len(serials))
			for id := range serials {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			for _, id := range ids {
				fmt.Fprintf(out, "%s\t%d\n", id, serials[id])
			}
			return nil
		})}
	cmd.AddCommand(create, list)
	return cmd
}

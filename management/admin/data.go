package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/store"
)

// maxImport bounds what import reads: a dump of 100k peers is far below.
const maxImport = 512 << 20

// peerView is a peer as listings show it.
type peerView struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	IP        string    `json:"ip"`
	FQDN      string    `json:"fqdn"`
	Key       string    `json:"key"`
	Connected bool      `json:"connected"`
	LastSeen  time.Time `json:"last_seen"`
	Ephemeral bool      `json:"ephemeral"`
	SetupKey  string    `json:"setup_key_id"`
	OS        string    `json:"os"`
	Version   string    `json:"version"`
}

func peersCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "peers", Short: "List and delete peers"}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List registered peers",
		Args:  cobra.NoArgs,
		RunE: e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
			var (
				a  account.Account
				ps []account.Peer
			)
			if err := st.Read(ctx, func(tx *store.Tx) error {
				var err error
				if a, err = tx.In(acc).Account(ctx); err != nil {
					return err
				}
				ps, err = tx.In(acc).Peers(ctx)
				return err
			}); err != nil {
				return err
			}
			views := make([]peerView, 0, len(ps))
			for _, p := range ps {
				views = append(views, peerView{ID: string(p.ID), Name: p.Name, IP: p.IP.String(), FQDN: p.FQDN(a.Domain), Key: p.Key.String(),
					Connected: p.Connected, LastSeen: p.LastSeen, Ephemeral: p.Ephemeral, SetupKey: string(p.SetupKeyID), OS: p.Meta.OS, Version: p.Meta.NetbirdVersion})
			}
			if asJSON {
				return printJSON(out, views)
			}
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tIP\tFQDN\tCONNECTED\tLAST SEEN\tKEY")
			for _, v := range views {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%v\t%s\t%s\n", v.ID, v.Name, v.IP, v.FQDN, v.Connected, v.LastSeen.Format(time.RFC3339), v.Key)
			}
			return w.Flush()
		}),
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	del := &cobra.Command{Use: "delete ID", Short: "Delete a peer; it drops off every other peer's map", Args: cobra.ExactArgs(1)}
	del.RunE = func(cmd *cobra.Command, args []string) error {
		return e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
			// A running server sees the serial move and updates its peers.
			err := peers.New(st, offline{}, slog.New(slog.DiscardHandler), nil).Delete(ctx, acc, account.PeerID(args[0]), initiator)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no peer with id %q in account %s (see: admin peers list)", args[0], acc)
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

func eventsCommand(e *env) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Print the account's activity log as JSON, newest first",
		Args:  cobra.NoArgs,
		RunE: e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
			var evs []account.Event
			if err := st.Read(ctx, func(tx *store.Tx) error {
				var err error
				evs, err = tx.In(acc).Events(ctx, limit)
				return err
			}); err != nil {
				return err
			}
			if evs == nil {
				evs = []account.Event{}
			}
			return printJSON(out, evs)
		}),
	}
	cmd.Flags().IntVar(&limit, "limit", 100, "newest events to print (0: all)")
	return cmd
}

func exportCommand(e *env) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the whole account (peers, users, setup-key hashes, local logins, activity) as JSON, to move it to another store",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&file, "out", "o", "-", "file to write (- for stdout), created 0600; it holds peer keys, setup-key and password hashes and the plaintext TOTP seeds of two-factor logins, which let its reader pass a user's second factor: keep it private and delete it after the import")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
			var d store.Dump
			// One transaction: a consistent snapshot even while peers register.
			if err := st.Tx(ctx, func(tx *store.Tx) error {
				var err error
				d, err = tx.In(acc).Export(ctx)
				return err
			}); err != nil {
				return fmt.Errorf("export account %s: %w", acc, err)
			}
			if file == "-" {
				return printJSON(out, d)
			}
			f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			if err := printJSON(f, d); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Exported account %s: %d peers, %d setup keys to %s\n", acc, len(d.Peers), len(d.SetupKeys), file)
			return nil
		})(cmd, args)
	}
	return cmd
}

// readDump decodes an export strictly (unknown fields refused, size
// bounded) and checks what the store does not: the account's settings and
// every object as the services would (validateDump).
func readDump(in io.Reader) (store.Dump, error) {
	dec := json.NewDecoder(io.LimitReader(in, maxImport))
	dec.DisallowUnknownFields()
	var d store.Dump
	if err := dec.Decode(&d); err != nil {
		return d, fmt.Errorf("not an export: %w", err)
	}
	if err := d.Account.Settings.Validate(); err != nil {
		return d, fmt.Errorf("%w; nothing was imported", err)
	}
	if err := validateDump(d); err != nil {
		return d, fmt.Errorf("%w; nothing was imported", err)
	}
	return d, nil
}

// importDump recreates the account in one transaction: all or nothing.
func importDump(ctx context.Context, st *store.Store, d store.Dump) error {
	err := st.Tx(ctx, func(tx *store.Tx) error { return tx.Import(ctx, d) })
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("%w (the account, a peer key or address, or a setup key already exists here; nothing was imported)", err)
	}
	return err
}

func importCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Recreate an exported account in this store (all or nothing)",
		Args:  cobra.ExactArgs(1),
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		var in io.Reader = os.Stdin
		if args[0] != "-" {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			in = f
		}
		d, err := readDump(in)
		if err != nil {
			return fmt.Errorf("read %s: %w", args[0], err)
		}
		st, err := e.open(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		if err := importDump(ctx, st, d); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "Imported account %s: %d peers, %d setup keys.\n", d.Account.ID, len(d.Peers), len(d.SetupKeys))
		return nil
	}
	return cmd
}

func backupCommand(e *env) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Copy the sqlite store to a file while management runs (Postgres: use pg_dump)",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&file, "out", "o", "", "file to create (required)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if file == "" {
			return errors.New("--out FILE is required")
		}
		st, err := e.open(cmd.Context())
		if err != nil {
			return err
		}
		defer st.Close()
		if err := st.Backup(cmd.Context(), file); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "Backed up the store to %s. Restore: stop management, copy it to %s in the data directory.\n", file, store.FileName)
		return nil
	}
	return cmd
}

// offline is the notifier of a process without streams: the server's store
// watcher delivers the change instead.
type offline struct{}

func (offline) AccountChanged(account.ID) {}

package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/management/access"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// errNoGroup: a group reference names no group of the account.
var errNoGroup = errors.New("no group")

// findGroup resolves a group by ID or name (a read: straight from the store).
func findGroup(ctx context.Context, st *store.Store, acc account.ID, ref string) (account.Group, error) {
	var g account.Group
	err := st.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		var err error
		g, err = at.Group(ctx, account.GroupID(ref))
		if errors.Is(err, store.ErrNotFound) {
			g, err = at.GroupByName(ctx, ref)
		}
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return g, fmt.Errorf("%w %q (see: admin groups list)", errNoGroup, ref)
	}
	return g, err
}

// groupIDs turns group names into IDs. A reference that names no group is
// passed on as it is, for the service to refuse as the API does.
func groupIDs(ctx context.Context, st *store.Store, acc account.ID, refs []string) ([]string, error) {
	out := make([]string, 0, len(refs))
	for _, ref := range refs {
		g, err := findGroup(ctx, st, acc, ref)
		switch {
		case err == nil:
			ref = string(g.ID)
		case !errors.Is(err, errNoGroup):
			return nil, err
		}
		out = append(out, ref)
	}
	return out, nil
}

func groupsCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "groups", Aliases: []string{"group"}, Short: "Manage peer groups (policies name them)"}
	var asJSON bool
	list := &cobra.Command{Use: "list", Short: "List groups and their peers", Args: cobra.NoArgs,
		RunE: e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
			var gs []account.Group
			if err := st.Read(ctx, func(tx *store.Tx) error {
				var err error
				gs, err = tx.In(acc).Groups(ctx)
				return err
			}); err != nil {
				return err
			}
			if asJSON {
				if gs == nil {
					gs = []account.Group{}
				}
				return printJSON(out, gs)
			}
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tPEERS")
			for _, g := range gs {
				members := strings.Join(func() []string {
					var s []string
					for _, p := range g.Peers {
						s = append(s, string(p))
					}
					return s
				}(), ",")
				if g.All {
					members = "(every peer)"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\n", g.ID, g.Name, members)
			}
			return w.Flush()
		})}
	list.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")

	create := &cobra.Command{Use: "create NAME [PEER_ID...]", Short: "Create a group", Args: cobra.MinimumNArgs(1)}
	create.RunE = func(cmd *cobra.Command, args []string) error {
		return e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
			ps := make([]account.PeerID, 0, len(args)-1)
			for _, p := range args[1:] {
				ps = append(ps, account.PeerID(p))
			}
			g, err := accessService(st).PutGroup(ctx, acc, "", args[0], ps, initiator)
			if err != nil {
				return fmt.Errorf("create group: %w", err)
			}
			fmt.Fprintf(out, "Created group %s (id %s).\n", g.Name, g.ID)
			return nil
		})(cmd, args)
	}

	members := func(use, short string, add bool) *cobra.Command {
		c := &cobra.Command{Use: use + " GROUP PEER_ID...", Short: short, Args: cobra.MinimumNArgs(2)}
		c.RunE = func(cmd *cobra.Command, args []string) error {
			return e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
				g, err := findGroup(ctx, st, acc, args[0])
				if err != nil {
					return err
				}
				if g.All {
					return errors.New("the All group holds every peer; it has no members to change")
				}
				ps := slices.Clone(g.Peers)
				for _, p := range args[1:] {
					id := account.PeerID(p)
					if !add {
						ps = slices.DeleteFunc(ps, func(x account.PeerID) bool { return x == id })
					} else if !slices.Contains(ps, id) {
						ps = append(ps, id)
					}
				}
				// The API's PUT: the whole member list, checked by the service.
				if _, err := accessService(st).PutGroup(ctx, acc, g.ID, g.Name, ps, initiator); err != nil {
					return fmt.Errorf("update group %s: %w", g.Name, err)
				}
				fmt.Fprintf(out, "Group %s has %d peers.\n", g.Name, len(ps))
				return nil
			})(cmd, args)
		}
		return c
	}

	del := &cobra.Command{Use: "delete GROUP", Short: "Delete a group no policy uses", Args: cobra.ExactArgs(1)}
	del.RunE = func(cmd *cobra.Command, args []string) error {
		return e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
			g, err := findGroup(ctx, st, acc, args[0])
			if err != nil {
				return err
			}
			if err := accessService(st).DeleteGroup(ctx, acc, g.ID, initiator); err != nil {
				return fmt.Errorf("delete group %s: %w", g.Name, err)
			}
			fmt.Fprintf(out, "Deleted group %s.\n", g.Name)
			return nil
		})(cmd, args)
	}
	cmd.AddCommand(list, create, members("add-peers", "Add peers to a group", true), members("remove-peers", "Remove peers from a group", false), del)
	return cmd
}

// parsePorts reads "22,80,443" and "1000-2000" lists.
func parsePorts(ports []string) ([]uint16, []account.PortRange, error) {
	var ps []uint16
	var rs []account.PortRange
	for _, raw := range ports {
		for _, s := range strings.Split(raw, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			lo, hi, isRange := strings.Cut(s, "-")
			a, err := strconv.ParseUint(lo, 10, 16)
			if err != nil || a == 0 {
				return nil, nil, fmt.Errorf("port %q: want 1-65535 or a range like 1000-2000", s)
			}
			if !isRange {
				ps = append(ps, uint16(a))
				continue
			}
			b, err := strconv.ParseUint(hi, 10, 16)
			if err != nil || b < a {
				return nil, nil, fmt.Errorf("port range %q: want START-END with START <= END", s)
			}
			rs = append(rs, account.PortRange{Start: uint16(a), End: uint16(b)})
		}
	}
	return ps, rs, nil
}

func policiesCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "policies", Aliases: []string{"policy"}, Short: "Manage access policies (who may reach whom)"}
	var asJSON bool
	list := &cobra.Command{Use: "list", Short: "List policies", Args: cobra.NoArgs,
		RunE: e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
			var ps []account.Policy
			if err := st.Read(ctx, func(tx *store.Tx) error {
				var err error
				ps, err = tx.In(acc).Policies(ctx)
				return err
			}); err != nil {
				return err
			}
			if asJSON {
				if ps == nil {
					ps = []account.Policy{}
				}
				return printJSON(out, ps)
			}
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tENABLED\tRULES")
			for _, p := range ps {
				var rs []string
				for _, r := range p.Rules {
					arrow := "->"
					if r.Bidirectional {
						arrow = "<->"
					}
					rs = append(rs, fmt.Sprintf("%s %s %v %s %v ports=%v%v", r.Action, r.Protocol, r.Sources, arrow, r.Destinations, r.Ports, r.PortRanges))
				}
				fmt.Fprintf(w, "%s\t%s\t%v\t%s\n", p.ID, p.Name, p.Enabled, strings.Join(rs, "; "))
			}
			return w.Flush()
		})}
	list.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")

	var (
		name, protocol, action string
		sources, dests, ports  []string
		bidir, disabled        bool
	)
	create := &cobra.Command{Use: "create", Short: "Create a policy with one rule", Args: cobra.NoArgs}
	f := create.Flags()
	f.StringVar(&name, "name", "", "policy name (required)")
	f.StringSliceVar(&sources, "source", nil, "source group (name or ID; repeatable)")
	f.StringSliceVar(&dests, "destination", nil, "destination group (name or ID; repeatable)")
	f.StringVar(&protocol, "protocol", account.ProtoAll, "all, tcp, udp or icmp")
	f.StringSliceVar(&ports, "ports", nil, "destination ports and ranges, e.g. 22,80,8000-8100 (tcp/udp; default all)")
	f.StringVar(&action, "action", account.ActionAccept, "accept or drop")
	f.BoolVar(&bidir, "bidirectional", false, "let the destinations open connections to the sources too")
	f.BoolVar(&disabled, "disabled", false, "create it switched off")
	create.RunE = func(cmd *cobra.Command, args []string) error {
		if name == "" || len(sources) == 0 || len(dests) == 0 {
			return errors.New("--name, --source and --destination are required")
		}
		// Protocol, action and ports are checked by the service, as
		// for the API; here only the flags are parsed.
		ps, rs, err := parsePorts(ports)
		if err != nil {
			return err
		}
		return e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
			r := account.Rule{Name: name, Enabled: true, Action: action, Protocol: protocol, Bidirectional: bidir, Ports: ps, PortRanges: rs}
			for _, refs := range []struct {
				in  []string
				out *[]account.GroupID
			}{{sources, &r.Sources}, {dests, &r.Destinations}} {
				ids, err := groupIDs(ctx, st, acc, refs.in)
				if err != nil {
					return err
				}
				for _, id := range ids {
					*refs.out = append(*refs.out, account.GroupID(id))
				}
			}
			p, err := accessService(st).PutPolicy(ctx, acc, account.Policy{Name: name, Enabled: !disabled, Rules: []account.Rule{r}}, initiator)
			if err != nil {
				return fmt.Errorf("create policy: %w", err)
			}
			fmt.Fprintf(out, "Created policy %s (id %s).\n", p.Name, p.ID)
			return nil
		})(cmd, args)
	}

	toggle := func(use string, on bool) *cobra.Command {
		c := &cobra.Command{Use: use + " POLICY_ID", Short: use + " a policy", Args: cobra.ExactArgs(1)}
		c.RunE = func(cmd *cobra.Command, args []string) error {
			return e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
				var p account.Policy
				err := st.Read(ctx, func(tx *store.Tx) (err error) { p, err = tx.In(acc).Policy(ctx, account.PolicyID(args[0])); return })
				if err == nil {
					p.Enabled = on
					_, err = accessService(st).PutPolicy(ctx, acc, p, initiator)
				}
				if errors.Is(err, store.ErrNotFound) || errors.Is(err, access.ErrNotFound) {
					return fmt.Errorf("no policy %q (see: admin policies list)", args[0])
				}
				if err == nil {
					fmt.Fprintf(out, "Policy %s %sd.\n", args[0], use)
				}
				return err
			})(cmd, args)
		}
		return c
	}
	del := &cobra.Command{Use: "delete POLICY_ID", Short: "Delete a policy", Args: cobra.ExactArgs(1)}
	del.RunE = func(cmd *cobra.Command, args []string) error {
		return e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
			err := accessService(st).DeletePolicy(ctx, acc, account.PolicyID(args[0]), initiator)
			if errors.Is(err, store.ErrNotFound) || errors.Is(err, access.ErrNotFound) {
				return fmt.Errorf("no policy %q (see: admin policies list)", args[0])
			}
			if err == nil {
				fmt.Fprintf(out, "Deleted policy %s.\n", args[0])
			}
			return err
		})(cmd, args)
	}
	cmd.AddCommand(list, create, toggle("enable", true), toggle("disable", false), del)
	return cmd
}

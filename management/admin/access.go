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
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// change runs fn in a transaction and bumps the serial, so running
// servers push the new maps, and logs the change.
func change(ctx context.Context, st *store.Store, acc account.ID, activity, target string, fn func(at *store.AccountTx) error) error {
	return st.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		if err := fn(at); err != nil {
			return err
		}
		if _, err := at.BumpSerial(ctx); err != nil {
			return err
		}
		_, err := at.InsertEvent(ctx, account.Event{At: time.Now().UTC(), Activity: activity, Initiator: initiator, Target: target})
		return err
	})
}

// findGroup resolves a group by ID or name.
func findGroup(ctx context.Context, at *store.AccountTx, ref string) (account.Group, error) {
	g, err := at.Group(ctx, account.GroupID(ref))
	if errors.Is(err, store.ErrNotFound) {
		g, err = at.GroupByName(ctx, ref)
	}
	if errors.Is(err, store.ErrNotFound) {
		return g, fmt.Errorf("no group %q (see: admin groups list)", ref)
	}
	return g, err
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
			g := account.Group{ID: account.GroupID(uuid.NewString()), AccountID: acc, Name: strings.TrimSpace(args[0])}
			if g.Name == "" || len(g.Name) > 128 {
				return errors.New("a group name is 1-128 characters")
			}
			err := change(ctx, st, acc, "group.add", string(g.ID), func(at *store.AccountTx) error {
				for _, p := range args[1:] {
					if _, err := at.Peer(ctx, account.PeerID(p)); err != nil {
						return fmt.Errorf("no peer %q in this account (see: admin peers list)", p)
					}
					g.Peers = append(g.Peers, account.PeerID(p))
				}
				return at.PutGroup(ctx, g)
			})
			if errors.Is(err, store.ErrConflict) {
				return fmt.Errorf("a group named %q exists already", g.Name)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "Created group %s (id %s).\n", g.Name, g.ID)
			return nil
		})(cmd, args)
	}

	members := func(use, short string, add bool) *cobra.Command {
		c := &cobra.Command{Use: use + " GROUP PEER_ID...", Short: short, Args: cobra.MinimumNArgs(2)}
		c.RunE = func(cmd *cobra.Command, args []string) error {
			return e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
				return change(ctx, st, acc, "group.update", args[0], func(at *store.AccountTx) error {
					g, err := findGroup(ctx, at, args[0])
					if err != nil {
						return err
					}
					if g.All {
						return errors.New("the All group holds every peer; it has no members to change")
					}
					for _, p := range args[1:] {
						id := account.PeerID(p)
						if add {
							if _, err := at.Peer(ctx, id); err != nil {
								return fmt.Errorf("no peer %q in this account (see: admin peers list)", p)
							}
							if !slices.Contains(g.Peers, id) {
								g.Peers = append(g.Peers, id)
							}
						} else {
							g.Peers = slices.DeleteFunc(g.Peers, func(x account.PeerID) bool { return x == id })
						}
					}
					return at.PutGroup(ctx, g)
				})
			})(cmd, args)
		}
		return c
	}

	del := &cobra.Command{Use: "delete GROUP", Short: "Delete a group no policy uses", Args: cobra.ExactArgs(1)}
	del.RunE = func(cmd *cobra.Command, args []string) error {
		return e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
			return change(ctx, st, acc, "group.delete", args[0], func(at *store.AccountTx) error {
				g, err := findGroup(ctx, at, args[0])
				if err != nil {
					return err
				}
				if g.All {
					return errors.New("the All group cannot be deleted")
				}
				pols, err := at.Policies(ctx)
				if err != nil {
					return err
				}
				for _, p := range pols {
					for _, r := range p.Rules {
						if slices.Contains(r.Sources, g.ID) || slices.Contains(r.Destinations, g.ID) {
							return fmt.Errorf("policy %q (%s) uses group %s: delete or change it first", p.Name, p.ID, g.Name)
						}
					}
				}
				return at.DeleteGroup(ctx, g.ID)
			})
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
		if !slices.Contains([]string{account.ProtoAll, account.ProtoTCP, account.ProtoUDP, account.ProtoICMP}, protocol) {
			return fmt.Errorf("--protocol %q: want all, tcp, udp or icmp", protocol)
		}
		if action != account.ActionAccept && action != account.ActionDrop {
			return fmt.Errorf("--action %q: want accept or drop", action)
		}
		ps, rs, err := parsePorts(ports)
		if err != nil {
			return err
		}
		if (len(ps) > 0 || len(rs) > 0) && protocol != account.ProtoTCP && protocol != account.ProtoUDP {
			return errors.New("--ports needs --protocol tcp or udp")
		}
		return e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
			p := account.Policy{ID: account.PolicyID(uuid.NewString()), AccountID: acc, Name: name, Enabled: !disabled}
			r := account.Rule{ID: uuid.NewString(), Name: name, Enabled: true, Action: action, Protocol: protocol,
				Bidirectional: bidir, Ports: ps, PortRanges: rs}
			err := change(ctx, st, acc, "policy.add", string(p.ID), func(at *store.AccountTx) error {
				for _, ref := range sources {
					g, err := findGroup(ctx, at, ref)
					if err != nil {
						return err
					}
					r.Sources = append(r.Sources, g.ID)
				}
				for _, ref := range dests {
					g, err := findGroup(ctx, at, ref)
					if err != nil {
						return err
					}
					r.Destinations = append(r.Destinations, g.ID)
				}
				p.Rules = []account.Rule{r}
				return at.PutPolicy(ctx, p)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "Created policy %s (id %s).\n", p.Name, p.ID)
			return nil
		})(cmd, args)
	}

	toggle := func(use string, on bool) *cobra.Command {
		c := &cobra.Command{Use: use + " POLICY_ID", Short: use + " a policy", Args: cobra.ExactArgs(1)}
		c.RunE = func(cmd *cobra.Command, args []string) error {
			return e.run(func(ctx context.Context, st *store.Store, acc account.ID, out io.Writer) error {
				err := change(ctx, st, acc, "policy.update", args[0], func(at *store.AccountTx) error {
					p, err := at.Policy(ctx, account.PolicyID(args[0]))
					if err != nil {
						return err
					}
					p.Enabled = on
					return at.PutPolicy(ctx, p)
				})
				if errors.Is(err, store.ErrNotFound) {
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
			err := change(ctx, st, acc, "policy.delete", args[0], func(at *store.AccountTx) error {
				return at.DeletePolicy(ctx, account.PolicyID(args[0]))
			})
			if errors.Is(err, store.ErrNotFound) {
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

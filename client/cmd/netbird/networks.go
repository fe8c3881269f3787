package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// networksCmd is `netbird networks list|select|deselect` (alias routes):
// which of the networks and exit nodes management offers this peer it
// routes through the mesh. Words and output follow the official CLI.
func networksCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "networks", Aliases: []string{"routes"}, Short: "Manage connections to NetBird Networks and Resources",
		Long: `Commands to list, select, or deselect networks. Replaces the "routes" command.`}
	list := &cobra.Command{Use: "list", Aliases: []string{"ls"}, Short: "List networks", Long: "List all available network routes.",
		Example: "  netbird networks list", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, done, err := g.daemon(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			r, err := c.ListNetworks(cmd.Context(), &daemonpb.ListNetworksRequest{})
			if err != nil {
				return fmt.Errorf("failed to list network: %w", plain(err))
			}
			printNetworks(cmd.OutOrStdout(), r.GetRoutes())
			return nil
		}}
	var appendSel bool
	sel := &cobra.Command{Use: "select network...|all", Short: "Select network",
		Long:    "Select a list of networks by identifiers or 'all' to clear all selections and to accept all (including new) networks.\nDefault mode is replace, use -a to append to already selected networks.",
		Example: "  netbird networks select all\n  netbird networks select route1 route2\n  netbird routes select -a route3",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, done, err := g.daemon(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			req := &daemonpb.SelectNetworksRequest{NetworkIDs: args}
			if len(args) == 1 && args[0] == "all" {
				req.All = true
			} else {
				req.Append = appendSel
			}
			if _, err := c.SelectNetworks(cmd.Context(), req); err != nil {
				return fmt.Errorf("failed to select networks: %w", plain(err))
			}
			fmt.Fprintln(cmd.OutOrStdout(), "Networks selected successfully.")
			return nil
		}}
	sel.PersistentFlags().BoolVarP(&appendSel, "append", "a", false, "Append to current network selection instead of replacing")
	desel := &cobra.Command{Use: "deselect network...|all", Short: "Deselect networks",
		Long:    "Deselect previously selected networks by identifiers or 'all' to disable accepting any networks.",
		Example: "  netbird networks deselect all\n  netbird networks deselect route1 route2",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, done, err := g.daemon(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			req := &daemonpb.SelectNetworksRequest{NetworkIDs: args, All: len(args) == 1 && args[0] == "all"}
			if _, err := c.DeselectNetworks(cmd.Context(), req); err != nil {
				return fmt.Errorf("failed to deselect networks: %w", plain(err))
			}
			fmt.Fprintln(cmd.OutOrStdout(), "Networks deselected successfully.")
			return nil
		}}
	cmd.AddCommand(list, sel, desel)
	return cmd
}

// printNetworks writes the list as the official CLI does. It goes to
// stdout (the official one writes to stderr) so it can be piped.
func printNetworks(w io.Writer, ns []*daemonpb.Network) {
	if len(ns) == 0 {
		fmt.Fprintln(w, "No networks available.")
		return
	}
	fmt.Fprintln(w, "Available Networks:")
	for _, n := range ns {
		st := "Not Selected"
		if n.GetSelected() {
			st = "Selected"
		}
		if len(n.GetDomains()) == 0 {
			fmt.Fprintf(w, "\n  - ID: %s\n    Network: %s\n    Status: %s\n", n.GetID(), n.GetRange(), st)
			continue
		}
		fmt.Fprintf(w, "\n  - ID: %s\n    Domains: %s\n    Status: %s\n", n.GetID(), strings.Join(n.GetDomains(), ", "), st)
		if len(n.GetResolvedIPs()) == 0 {
			fmt.Fprintf(w, "    Resolved IPs: -\n")
			continue
		}
		fmt.Fprintf(w, "    Resolved IPs:\n")
		// Sorted, unlike the official CLI, so the output is stable.
		for _, d := range sortedKeys(n.GetResolvedIPs()) {
			fmt.Fprintf(w, "      [%s]: %s\n", d, strings.Join(n.GetResolvedIPs()[d].GetIps(), ", "))
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// exitNodeWait bounds how long `up --exit-node` waits for management to
// offer the exit node after connecting (the network map comes after the
// login).
const exitNodeWait = 15 * time.Second

// useExitNode selects exit node id and deselects the other exit nodes, so
// internet traffic leaves through id only. It waits for the network map
// to offer id; an unknown ID or one that is not an exit node changes
// nothing.
func useExitNode(ctx context.Context, c daemonpb.DaemonServiceClient, id string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	var ns []*daemonpb.Network
	for {
		r, err := c.ListNetworks(ctx, &daemonpb.ListNetworksRequest{})
		if err != nil {
			return fmt.Errorf("list networks: %w", plain(err))
		}
		ns = r.GetRoutes()
		if slices.ContainsFunc(ns, func(n *daemonpb.Network) bool { return n.GetID() == id }) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	var exits, others []string
	for _, n := range ns {
		if !n.GetExitNode() {
			continue
		}
		exits = append(exits, n.GetID())
		if n.GetID() != id && n.GetSelected() {
			others = append(others, n.GetID())
		}
	}
	i := slices.IndexFunc(ns, func(n *daemonpb.Network) bool { return n.GetID() == id })
	switch {
	case i < 0 && len(exits) == 0:
		return fmt.Errorf("exit node %q is not offered to this peer (it is offered no exit node; see netbird networks ls)", id)
	case i < 0:
		return fmt.Errorf("exit node %q is not offered to this peer; exit nodes offered: %s", id, strings.Join(exits, ", "))
	case !ns[i].GetExitNode():
		return fmt.Errorf("%q is a network (%s), not an exit node: use netbird networks select %s", id, ns[i].GetRange(), id)
	}
	if _, err := c.SelectNetworks(ctx, &daemonpb.SelectNetworksRequest{NetworkIDs: []string{id}, Append: true}); err != nil {
		return fmt.Errorf("select exit node %s: %w", id, plain(err))
	}
	// Select first, then drop the others, so traffic never falls back to
	// the local uplink in between.
	if len(others) > 0 {
		if _, err := c.DeselectNetworks(ctx, &daemonpb.SelectNetworksRequest{NetworkIDs: others}); err != nil {
			return fmt.Errorf("deselect the other exit nodes (%s): %w", strings.Join(others, ", "), plain(err))
		}
	}
	return nil
}

// errNoExitNodeName is returned for `up --exit-node ""`.
var errNoExitNodeName = errors.New("--exit-node needs the ID of an exit node (see netbird networks ls)")

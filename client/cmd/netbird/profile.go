package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// profileCmd is `netbird profile add|list|select|remove`: several
// servers or accounts side by side, each with its own key and state.
func profileCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "profile", Short: "Keep several servers or accounts side by side and switch between them"}
	add := &cobra.Command{Use: "add NAME", Short: "Create a profile with its own WireGuard key", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, done, err := g.daemon(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if _, err := c.AddProfile(cmd.Context(), &daemonpb.AddProfileRequest{ProfileName: args[0]}); err != nil {
				return plain(err)
			}
			fmt.Printf("Profile %s added. Use it: netbird profile select %s, then netbird up --management-url URL --setup-key KEY\n", args[0], args[0])
			return nil
		}}
	list := &cobra.Command{Use: "list", Short: "List profiles (* marks the active one)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, done, err := g.daemon(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			r, err := c.ListProfiles(cmd.Context(), &daemonpb.ListProfilesRequest{})
			if err != nil {
				return plain(err)
			}
			for _, p := range r.GetProfiles() {
				mark := " "
				if p.GetIsActive() {
					mark = "*"
				}
				url := p.GetManagementUrl()
				if url == "" {
					url = "(no server yet)"
				}
				fmt.Printf("%s %s\t%s\n", mark, p.GetName(), url)
			}
			return nil
		}}
	sel := &cobra.Command{Use: "select NAME", Short: "Switch to a profile (live, if connected)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, done, err := g.daemon(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if _, err := c.SwitchProfile(cmd.Context(), &daemonpb.SwitchProfileRequest{ProfileName: &args[0]}); err != nil {
				return plain(err)
			}
			fmt.Printf("Profile %s selected.\n", args[0])
			return nil
		}}
	rm := &cobra.Command{Use: "remove NAME", Aliases: []string{"rm"}, Short: "Delete a profile and its key", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, done, err := g.daemon(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if _, err := c.RemoveProfile(cmd.Context(), &daemonpb.RemoveProfileRequest{ProfileName: args[0]}); err != nil {
				return plain(err)
			}
			fmt.Printf("Profile %s removed.\n", args[0])
			return nil
		}}
	cmd.AddCommand(add, list, sel, rm)
	return cmd
}

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/wiremesh/wiremesh/client/engine"
	"github.com/wiremesh/wiremesh/client/mgmtclient"
	"github.com/wiremesh/wiremesh/client/state"
)

// sshToken gets a token of the account's identity provider for an SSH
// server that asks for one instead of a key (NetBird's agents, whose
// servers check a JWT): the same login NetBird's `netbird ssh` has its
// daemon run, the flow management describes (device code, or PKCE with a
// browser), here in this process with the profile's keys. A fresh token
// each time: those servers accept tokens only minutes old.
//
// The token is a full identity token of the user (see docs/security.md):
// whoever runs the server that gets it can replay it until it expires.
// So before the login starts, out (stderr) names the peer it goes to.
func sshToken(configPath string, noBrowser bool, peerName, peerIP string, out io.Writer) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		fmt.Fprintf(out, "The SSH server of peer %s (%s) refused this peer's key and asks for a login token:\n"+
			"your identity token will be sent to that peer (valid until it expires; see docs/security.md).\n", peerName, peerIP)
		cfg, err := state.Load(configPath)
		if err != nil {
			return "", err
		}
		t, err := mgmtclient.ParseURL(cfg.ManagementURL)
		if err != nil {
			return "", err
		}
		browser := canOpenBrowser(noBrowser)
		flow, err := engine.StartSSO(ctx, t, cfg.Key(), browser, slog.New(slog.DiscardHandler))
		if err != nil {
			return "", fmt.Errorf("the peer asks for a login token: %w", err)
		}
		defer flow.Close()
		p := flow.Prompt()
		// On stderr: stdout is the remote command's.
		if browser {
			fmt.Fprintf(out, "The peer asks for a login: log in in your browser.\nIf it did not open, use this URL:\n\n%s\n\n", p.VerificationURIComplete)
			openBrowser(p.VerificationURIComplete)
		} else {
			u := p.VerificationURIComplete
			if u == "" {
				u = p.VerificationURI
			}
			fmt.Fprintf(out, "The peer asks for a login: open this URL on any device and confirm the code\n\n%s\n\nCode: %s\n\n", u, p.UserCode)
		}
		tok, err := flow.Wait(ctx)
		if err != nil {
			return "", fmt.Errorf("login for the peer's SSH server: %w", err)
		}
		return tok.JWT, nil
	}
}

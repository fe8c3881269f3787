package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"

	"github.com/wiremesh/wiremesh/client/engine"
	"github.com/wiremesh/wiremesh/client/mgmtclient"
	"github.com/wiremesh/wiremesh/client/sso"
	"github.com/wiremesh/wiremesh/client/state"
	"github.com/wiremesh/wiremesh/internal/version"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// canOpenBrowser reports whether a browser can open here for the PKCE
// login (a desktop session), unless the user said not to.
func canOpenBrowser(noBrowser bool) bool {
	if noBrowser {
		return false
	}
	switch runtime.GOOS {
	case "darwin", "windows":
		return true
	}
	return os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != ""
}

// openBrowser opens url in the desktop's browser, best effort.
func openBrowser(url string) {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		cmd = exec.Command("xdg-open", url)
	}
	if cmd.Start() == nil {
		go func() { _ = cmd.Wait() }()
	}
}

// showPrompt tells the person how to log in.
func showPrompt(p sso.Prompt, browser bool) {
	if browser {
		fmt.Printf("Please do the SSO login in your browser.\nIf your browser didn't open automatically, use this URL to log in:\n\n%s\n\n", p.VerificationURIComplete)
		openBrowser(p.VerificationURIComplete)
		return
	}
	u := p.VerificationURIComplete
	if u == "" {
		u = p.VerificationURI
	}
	fmt.Printf("Please do the SSO login: open this URL on any device and confirm the code\n\n%s\n\nCode: %s\n\n", u, p.UserCode)
}

// loginDaemon logs in through the daemon; when the server asks for a
// person, it shows the SSO prompt and waits for the login to finish.
func loginDaemon(ctx context.Context, c daemonpb.DaemonServiceClient, req *daemonpb.LoginRequest, noBrowser bool) error {
	resp, err := c.Login(ctx, req)
	if err != nil {
		return plain(err)
	}
	if !resp.GetNeedsSSOLogin() {
		return nil
	}
	p := sso.Prompt{VerificationURI: resp.GetVerificationURI(), VerificationURIComplete: resp.GetVerificationURIComplete(), UserCode: resp.GetUserCode()}
	showPrompt(p, req.GetIsUnixDesktopClient() && !noBrowser)
	done, err := c.WaitSSOLogin(ctx, &daemonpb.WaitSSOLoginRequest{UserCode: resp.GetUserCode(), Hostname: req.GetHostname()})
	if err != nil {
		return plain(err)
	}
	if done.GetEmail() != "" {
		fmt.Printf("Logged in as %s\n", done.GetEmail())
	}
	return nil
}

// ssoForeground logs in through SSO in this process when the server does
// not accept the peer as it is (new, or its login expired).
func ssoForeground(ctx context.Context, t mgmtclient.Target, cfg state.Config, noBrowser bool, log *slog.Logger) error {
	_, err := engine.Login(ctx, t, cfg.Key(), cfg.RotatedSSHKey(), "", cfg.Hostname, version.Wire(), cfg.DisableIPv6, log)
	if !errors.Is(err, mgmtclient.ErrNeedsLogin) {
		return err
	}
	browser := canOpenBrowser(noBrowser)
	flow, err := engine.StartSSO(ctx, t, cfg.Key(), browser, log)
	if err != nil {
		return err
	}
	defer flow.Close()
	showPrompt(flow.Prompt(), browser)
	tok, err := flow.Wait(ctx)
	if err != nil {
		return err
	}
	if _, err := engine.LoginJWT(ctx, t, cfg.Key(), cfg.RotatedSSHKey(), tok.JWT, cfg.Hostname, version.Wire(), cfg.DisableIPv6, log); err != nil {
		return err
	}
	if tok.Email != "" {
		fmt.Printf("Logged in as %s\n", tok.Email)
	}
	return nil
}

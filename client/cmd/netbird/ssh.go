package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"

	"github.com/wiremesh/wiremesh/client/sshclient"
	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/client/state"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// exitError carries a remote command's exit code out of `netbird ssh`.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("remote command exited with %d", e.code) }

type sshFlags struct {
	port          int
	user          string
	tty, noTTY    bool
	noCommand     bool
	noBrowser     bool
	local, remote []string
}

func sshCmd(g *globals) *cobra.Command {
	var f sshFlags
	cmd := &cobra.Command{
		Use:   "ssh [flags] [user@]peer [command...]",
		Short: "SSH to a peer over the mesh, checking its host key against the network map",
		Long: "Connects to the SSH server of a peer (by name, FQDN or overlay IP) with this agent's own key. " +
			"The peer's host key must be the one management gives for it: there is no trust-on-first-use prompt, " +
			"and a server presenting another key is refused. Reads this peer's key from its profile, so it runs as root.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSSH(cmd.Context(), g, f, args[0], strings.Join(args[1:], " "))
		},
	}
	cmd.Flags().SetInterspersed(false) // flags after the peer belong to the command
	cmd.AddCommand(append(sshHelperCmds(g), sshRotateKeyCmd(g))...)
	fl := cmd.Flags()
	fl.IntVarP(&f.port, "port", "p", sshserver.Port, "the peer's SSH port")
	fl.StringVarP(&f.user, "user", "u", "", "remote Unix user (default: user@ in the target, else your own user name)")
	fl.StringVar(&f.user, "login", "", "alias for --user")
	fl.BoolVarP(&f.tty, "tty", "t", false, "force a pseudo-terminal")
	fl.BoolVarP(&f.noTTY, "no-tty", "T", false, "never ask for a pseudo-terminal")
	fl.BoolVarP(&f.noCommand, "no-command", "N", false, "run nothing: only forward ports (-L/-R)")
	fl.StringArrayVarP(&f.local, "local-forward", "L", nil, "[bind_address:]port:host:hostport: carry local connections to host:hostport as seen from the peer")
	fl.BoolVar(&f.noBrowser, "no-browser", false, "for a peer that asks for a login token (NetBird's agents): print the login URL instead of opening a browser")
	fl.StringArrayVarP(&f.remote, "remote-forward", "R", nil, "[bind_address:]port:host:hostport: the peer listens (on its loopback by default) and connections come to host:hostport here")
	return cmd
}

// sshTarget is a peer as `netbird ssh` found it in the daemon's map.
type sshTarget struct {
	name, ip string
	hostKey  ssh.PublicKey
}

// findPeer resolves name (a name, FQDN or overlay IP) among the daemon's
// peers.
func findPeer(peers []*daemonpb.PeerState, name string) (sshTarget, error) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	var found []*daemonpb.PeerState
	for _, p := range peers {
		fqdn := strings.TrimSuffix(strings.ToLower(p.GetFqdn()), ".")
		short, _, _ := strings.Cut(fqdn, ".")
		if p.GetIP() == name || fqdn == name || short == name {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		// Management sends a peer only the peers a policy connects it
		// with: no tunnel, no packet, so say so rather than time out.
		return sshTarget{}, fmt.Errorf("%s is not in this peer's network map: no policy connects them, or no such peer exists (see `netbird status -d`)", name)
	case 1:
	default:
		var names []string
		for _, p := range found {
			names = append(names, p.GetFqdn())
		}
		return sshTarget{}, fmt.Errorf("%q names several peers (%s): use an FQDN or IP", name, strings.Join(names, ", "))
	}
	p := found[0]
	k, err := sshserver.ParsePeerKey(p.GetSshHostKey())
	if err != nil {
		return sshTarget{}, fmt.Errorf("peer %s: %w", p.GetFqdn(), err)
	}
	if k == nil {
		return sshTarget{}, fmt.Errorf("peer %s has no SSH key in the network map (its agent does not report one)", p.GetFqdn())
	}
	return sshTarget{name: p.GetFqdn(), ip: p.GetIP(), hostKey: k}, nil
}

func runSSH(ctx context.Context, g *globals, f sshFlags, target, command string) error {
	userName, host, ok := strings.Cut(target, "@")
	if !ok {
		userName, host = f.user, target
	}
	if userName == "" {
		u, err := defaultSSHUser(os.Getuid(), os.Getenv("SUDO_USER"), user.Current)
		if err != nil {
			return err
		}
		userName = u
	}
	c, closeConn, err := g.daemon(ctx)
	if err != nil {
		return err
	}
	st, err := c.Status(ctx, &daemonpb.StatusRequest{GetFullPeerStatus: true})
	closeConn()
	if err != nil {
		return plain(err)
	}
	t, err := findPeer(st.GetFullStatus().GetPeers(), host)
	if err != nil {
		return err
	}
	signer, err := ownSSHKey(g.configPath())
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	addr := net.JoinHostPort(t.ip, strconv.Itoa(f.port))
	client, err := sshclient.DialWithToken(ctx, addr, userName, signer, t.hostKey, sshToken(g.configPath(), f.noBrowser, t.name, t.ip, os.Stderr))
	var hke *sshclient.HostKeyError
	if errors.As(err, &hke) {
		return hostKeyMismatchError(userName, t, addr, f.port, hke, func() string {
			return reportHostKeyMismatch(ctx, g, t.ip, f.port, userName, hke.Presented)
		})
	}
	if err != nil {
		return fmt.Errorf("ssh %s@%s (%s): %w", userName, t.name, addr, err)
	}
	defer client.Close()
	fwdErr := make(chan error, len(f.local)+len(f.remote))
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	nfwd := 0
	for _, spec := range f.local {
		fw, err := sshclient.ParseForward(spec)
		if err != nil {
			return err
		}
		nfwd++
		go func() { fwdErr <- sshclient.LocalForward(fctx, client, fw) }()
	}
	for _, spec := range f.remote {
		fw, err := sshclient.ParseForward(spec)
		if err != nil {
			return fmt.Errorf("-R: %w", err)
		}
		nfwd++
		go func() {
			fwdErr <- sshclient.RemoteForward(fctx, client, sshclient.Forward{Listen: fw.Listen, Target: fw.Target})
		}()
	}
	defer func() {
		cancel()
		for range nfwd {
			<-fwdErr
		}
	}()
	if f.noCommand {
		select {
		case err := <-fwdErr:
			nfwd--
			return err
		case <-ctx.Done():
			return nil
		}
	}
	stdinTTY := isTerminal(os.Stdin)
	wantPTY := !f.noTTY && (f.tty || (command == "" && stdinTTY))
	if wantPTY && stdinTTY {
		restore, err := rawMode(os.Stdin)
		if err != nil {
			return err
		}
		defer restore()
	}
	env := map[string]string{}
	for _, k := range []string{"LANG", "LC_ALL", "LC_CTYPE"} {
		if v := os.Getenv(k); v != "" {
			env[k] = v
		}
	}
	code, err := sshclient.Run(ctx, client, sshclient.Session{Command: command, PTY: wantPTY, Term: os.Getenv("TERM"), Env: env,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	if err != nil {
		return err
	}
	if code != 0 {
		return exitError{code}
	}
	return nil
}

// hostKeyVerdict decides what a host key other than the map's means,
// presented at port of peer name by a server identifying as version:
// report is true only for a mesh agent's server on one of its ports (a
// possible forgery, for the activity log); otherwise why says what it is
// instead. A host whose own sshd holds port 22 (our server then serves on
// 22022 only) or a server on another port presents its own key, and
// reporting that would fill the activity log with false alarms.
func hostKeyVerdict(name string, port int, version string) (report bool, why string) {
	if !sshclient.MeshServer(version) {
		why = fmt.Sprintf("port %d of %s is served by another SSH server (%s), not %s's wiremesh SSH server",
			port, name, sshclient.PrintableVersion(version), name)
		if port != sshserver.InternalPort {
			why += fmt.Sprintf("; try -p %d", sshserver.InternalPort)
		}
		return false, why
	}
	if !sshclient.MeshPort(port) {
		return false, fmt.Sprintf("not reported to management's activity log: port %d is not an SSH port of %s's agent (%d or %d)",
			port, name, sshserver.Port, sshserver.InternalPort)
	}
	return true, ""
}

// hostKeyMismatchError is `netbird ssh`'s error for a server that
// presented another host key than the map's; report (called only for a
// possible forgery) tells the daemon and says how that went.
func hostKeyMismatchError(userName string, t sshTarget, addr string, port int, hke *sshclient.HostKeyError, report func() string) error {
	ok, why := hostKeyVerdict(t.name, port, hke.ServerVersion)
	switch {
	case ok:
		return fmt.Errorf("ssh %s@%s (%s): %w; %s", userName, t.name, addr, hke, report())
	case sshclient.MeshServer(hke.ServerVersion):
		return fmt.Errorf("ssh %s@%s (%s): %w; %s", userName, t.name, addr, hke, why)
	default:
		return fmt.Errorf("ssh %s@%s (%s): %s", userName, t.name, addr, why)
	}
}

// proxyTap is `netbird ssh proxy`'s look at the key exchange: when the
// server presents another host key than the map's, it says so on w and,
// for a possible forgery (hostKeyVerdict), reports it with report before
// the bytes go on to OpenSSH (which kills its proxy command when it
// gives up).
func proxyTap(w io.Writer, t sshTarget, port int, report func(ssh.PublicKey) string) *sshclient.KexTap {
	tap := &sshclient.KexTap{}
	tap.HostKey = func(k ssh.PublicKey) {
		if bytes.Equal(k.Marshal(), t.hostKey.Marshal()) {
			return
		}
		ok, why := hostKeyVerdict(t.name, port, tap.ServerVersion())
		switch {
		case ok:
			why = report(k)
		case !sshclient.MeshServer(tap.ServerVersion()):
			fmt.Fprintf(w, "netbird ssh proxy: %s\n", why)
			return
		}
		fmt.Fprintf(w, "netbird ssh proxy: %s presented host key %s, the network map says %s; %s\n",
			t.name, ssh.FingerprintSHA256(k), ssh.FingerprintSHA256(t.hostKey), why)
	}
	return tap
}

// reportHostKeyMismatch tells the daemon the server at ip:port presented
// key instead of the map's, for the activity log, and says whether it
// was reported. The refusal stands either way; the report only waits a
// few seconds.
func reportHostKeyMismatch(ctx context.Context, g *globals, ip string, port int, userName string, key ssh.PublicKey) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, closeConn, err := g.daemon(ctx)
	if err != nil {
		return fmt.Sprintf("not reported to management's activity log: %v", err)
	}
	defer closeConn()
	_, err = c.ReportSSHHostKeyMismatch(ctx, &daemonpb.ReportSSHHostKeyMismatchRequest{PeerIp: ip, Port: uint32(port), UnixUser: userName, PresentedHostKey: key.Marshal()})
	if err != nil {
		return fmt.Sprintf("not reported to management's activity log: %v", plain(err))
	}
	return "reported to management's activity log"
}

// defaultSSHUser is the remote user when none is given: under sudo
// (which netbird ssh needs, to read this peer's key) the user who ran
// sudo, as ssh run by that user would pick, else the current user.
func defaultSSHUser(uid int, sudoUser string, current func() (*user.User, error)) (string, error) {
	if uid == 0 && sudoUser != "" {
		return sudoUser, nil
	}
	u, err := current()
	if err != nil {
		return "", fmt.Errorf("no remote user given (user@peer or --user) and the local one is unknown: %w", err)
	}
	return u.Username, nil
}

// ownSSHKey is this peer's SSH key, as its agent reports it to
// management: the profile's rotated key, else the one derived from its
// WireGuard key.
func ownSSHKey(path string) (ssh.Signer, error) {
	cfg, err := state.Load(path)
	if errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("netbird ssh logs in with this peer's own key, kept in %s: run it as root (sudo)", path)
	}
	if err != nil {
		return nil, err
	}
	if cfg.PrivateKey == "" {
		return nil, fmt.Errorf("this profile (%s) has no key yet: run `netbird up` first", path)
	}
	k, err := sshserver.AgentKey(cfg.Key(), cfg.RotatedSSHKey())
	if err != nil {
		return nil, err
	}
	return sshserver.Signer(k)
}

// sshHelperCmds are what the Host blocks of `netbird ssh-config` run:
// `netbird ssh proxy HOST PORT` (ProxyCommand) and `netbird ssh
// known-hosts HOST` (KnownHostsCommand).
func sshHelperCmds(g *globals) []*cobra.Command {
	proxy := &cobra.Command{
		Use:   "proxy HOST PORT",
		Short: "Carry stdin/stdout to a peer's SSH port (an OpenSSH ProxyCommand; see ssh-config)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := daemonPeer(cmd.Context(), g, args[0])
			if err != nil {
				return err
			}
			port, err := strconv.ParseUint(args[1], 10, 16)
			if err != nil || port == 0 {
				return fmt.Errorf("PORT %q is not a TCP port", args[1])
			}
			var d net.Dialer
			c, err := d.DialContext(cmd.Context(), "tcp", net.JoinHostPort(t.ip, args[1]))
			if err != nil {
				return err
			}
			defer c.Close()
			// The process ends with the server's side; the stdin copier
			// goes with it.
			go func() {
				_, _ = io.Copy(c, os.Stdin)
				_ = c.(*net.TCPConn).CloseWrite()
			}()
			// OpenSSH checks the host key (KnownHostsCommand); the tap
			// only sees which key the server presents. The remote user
			// is not known here.
			tap := proxyTap(os.Stderr, t, int(port), func(k ssh.PublicKey) string {
				return reportHostKeyMismatch(cmd.Context(), g, t.ip, int(port), "", k)
			})
			_, err = io.Copy(io.MultiWriter(tap, os.Stdout), c)
			return err
		},
	}
	known := &cobra.Command{
		Use:   "known-hosts HOST",
		Short: "Print a peer's host key from the network map as a known_hosts line (an OpenSSH KnownHostsCommand)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := daemonPeer(cmd.Context(), g, args[0])
			if err != nil {
				return err
			}
			fmt.Printf("%s %s", args[0], ssh.MarshalAuthorizedKey(t.hostKey))
			return nil
		},
	}
	return []*cobra.Command{proxy, known}
}

// daemonPeer finds a peer in the daemon's map.
func daemonPeer(ctx context.Context, g *globals, name string) (sshTarget, error) {
	c, closeConn, err := g.daemon(ctx)
	if err != nil {
		return sshTarget{}, err
	}
	defer closeConn()
	st, err := c.Status(ctx, &daemonpb.StatusRequest{GetFullPeerStatus: true})
	if err != nil {
		return sshTarget{}, plain(err)
	}
	return findPeer(st.GetFullStatus().GetPeers(), name)
}

// sshConfigCmd prints OpenSSH Host blocks for the peers that serve SSH,
// so plain `ssh peer` works: the connection goes through `netbird ssh
// proxy`, the host key comes from the map (KnownHostsCommand, nothing
// trusted on first use), and the client key is this peer's own, written
// with --identity-file.
func sshConfigCmd(g *globals) *cobra.Command {
	var identity string
	var short bool
	cmd := &cobra.Command{
		Use:   "ssh-config",
		Short: "Print OpenSSH Host blocks for the mesh's SSH peers (append them to ~/.ssh/config)",
		Long: "Prints one Host block per peer with an SSH key in the network map, matching its FQDN and overlay IP " +
			"(--short-names adds the first label: a peer named like one of your other hosts would then take its name). " +
			"Servers let in only this peer's own key: --identity-file PATH writes it there (0600, OpenSSH format) and the blocks name it. " +
			"Needs root, as `netbird ssh`: the key is in the root-owned profile and the blocks' helpers talk to the root-only daemon socket, " +
			"so use the blocks from root's ~/.ssh/config (or sudo ssh).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, closeConn, err := g.daemon(cmd.Context())
			if err != nil {
				return err
			}
			st, err := c.Status(cmd.Context(), &daemonpb.StatusRequest{GetFullPeerStatus: true})
			closeConn()
			if err != nil {
				return plain(err)
			}
			if identity != "" {
				if err := writeIdentity(g.configPath(), identity); err != nil {
					return err
				}
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			out, n, skipped := sshConfig(self, g.daemonAddr, identity, short, st.GetFullStatus().GetPeers())
			for _, why := range skipped {
				fmt.Fprintln(os.Stderr, "skipped:", why)
			}
			if n == 0 {
				return errors.New("no peer in the network map has an SSH key")
			}
			fmt.Print(out)
			return nil
		},
	}
	cmd.Flags().StringVar(&identity, "identity-file", "", "write this peer's SSH key to PATH (0600) and use it in the blocks")
	cmd.Flags().BoolVar(&short, "short-names", false, "also match each peer by the first label of its FQDN (ssh web1)")
	return cmd
}

func writeIdentity(profile, path string) error {
	cfg, err := state.Load(profile)
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("--identity-file: this peer's key is kept in %s: run as root (sudo)", profile)
	}
	if err != nil {
		return err
	}
	if cfg.PrivateKey == "" {
		return fmt.Errorf("this profile (%s) has no key yet: run `netbird up` first", profile)
	}
	pk, err := sshserver.AgentKey(cfg.Key(), cfg.RotatedSSHKey())
	if err != nil {
		return err
	}
	block, err := ssh.MarshalPrivateKey(pk, "netbird peer key")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return fmt.Errorf("--identity-file: %w", err)
	}
	return os.Chmod(path, 0o600) // an existing file keeps its mode otherwise
}

// sshConfig renders the Host blocks for peers (those with a valid SSH
// key, FQDN and IP) and how many there are, with why others were left
// out. Names and addresses come from the network map, that is from other
// peers (a peer chooses its hostname): OpenSSH runs ProxyCommand and
// KnownHostsCommand through a shell, so only strict DNS names and parsed
// IPs are ever written.
func sshConfig(netbird, daemonAddr, identity string, short bool, peers []*daemonpb.PeerState) (string, int, []string) {
	var b strings.Builder
	b.WriteString("# Written by `netbird ssh-config`: the mesh's SSH peers, host keys from the network map.\n")
	sorted := append([]*daemonpb.PeerState(nil), peers...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].GetFqdn() < sorted[j].GetFqdn() })
	n := 0
	var skipped []string
	nb := netbird + " --daemon-addr " + daemonAddr
	for _, p := range sorted {
		if len(p.GetSshHostKey()) == 0 || p.GetFqdn() == "" {
			continue
		}
		fqdn := strings.ToLower(strings.TrimSuffix(p.GetFqdn(), "."))
		ip, err := netip.ParseAddr(p.GetIP())
		switch {
		case !safeDNSName(fqdn):
			skipped = append(skipped, fmt.Sprintf("peer %q: its name is not a plain DNS name", p.GetFqdn()))
			continue
		case err != nil:
			skipped = append(skipped, fmt.Sprintf("peer %s: address %q is not an IP", fqdn, p.GetIP()))
			continue
		}
		if _, err := sshserver.ParsePeerKey(p.GetSshHostKey()); err != nil {
			skipped = append(skipped, fmt.Sprintf("peer %s: %v", fqdn, err))
			continue
		}
		n++
		hosts := fqdn + " " + ip.String()
		if short {
			first, _, _ := strings.Cut(fqdn, ".")
			hosts = first + " " + hosts
		}
		fmt.Fprintf(&b, "\nHost %s\n", hosts)
		fmt.Fprintf(&b, "    HostKeyAlias %s\n", fqdn)
		fmt.Fprintf(&b, "    ProxyCommand %s ssh proxy %s %%p\n", nb, fqdn)
		fmt.Fprintf(&b, "    KnownHostsCommand %s ssh known-hosts %s\n", nb, fqdn)
		b.WriteString("    UserKnownHostsFile /dev/null\n    GlobalKnownHostsFile /dev/null\n    StrictHostKeyChecking yes\n")
		if identity != "" {
			fmt.Fprintf(&b, "    IdentityFile %s\n    IdentitiesOnly yes\n", identity)
		}
	}
	return b.String(), n, skipped
}

// safeDNSName reports whether name is dot-separated labels of [a-z0-9-]
// not starting or ending with "-": nothing a shell or ssh_config reads
// as anything but a word.
func safeDNSName(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for _, l := range strings.Split(name, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

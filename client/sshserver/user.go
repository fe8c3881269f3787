package sshserver

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// account is the local Unix user a session runs as.
type account struct {
	Name, Home, Shell string
	UID, GID          uint32
	Groups            []uint32
}

// errUser is a refusal the client is told about as it is.
var errUser = errors.New("login refused")

// lookupUser resolves the Unix user a client asked for and checks that a
// session may run as it: it exists, it is not root unless o.AllowRoot, it
// is not in o.DeniedUsers, its shell is not a nologin shell, it is not
// locked or expired in the shadow file (as OpenSSH decides without PAM),
// and an agent not running as root only serves its own user (it cannot
// switch). Users come from /etc/passwd and /etc/group only: the agent is
// built without cgo, so NSS sources (LDAP, SSSD) are not consulted.
func lookupUser(name string, o Options) (account, error) {
	if name == "" {
		return account{}, fmt.Errorf("%w: no user name given", errUser)
	}
	if slices.Contains(o.DeniedUsers, name) {
		return account{}, fmt.Errorf("%w: user %q is excluded on this peer", errUser, name)
	}
	u, err := user.Lookup(name)
	if err != nil {
		return account{}, fmt.Errorf("%w: no local user %q", errUser, name)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return account{}, fmt.Errorf("%w: user %q has a non-numeric uid/gid", errUser, name)
	}
	if uid == 0 && !o.AllowRoot {
		return account{}, fmt.Errorf("%w: logging in as root is disabled on this peer (netbird up --enable-ssh-root)", errUser)
	}
	a := account{Name: u.Username, Home: u.HomeDir, UID: uint32(uid), GID: uint32(gid), Shell: shellOf(o.Passwd, u.Username)}
	if a.Shell == "" {
		a.Shell = "/bin/sh"
	}
	switch filepath.Base(a.Shell) {
	case "nologin", "false":
		return account{}, fmt.Errorf("%w: user %q is disabled (shell %s)", errUser, name, a.Shell)
	}
	if me := uint32(os.Getuid()); me != 0 && me != a.UID {
		return account{}, fmt.Errorf("%w: this agent does not run as root and serves only its own user", errUser)
	}
	if os.Getuid() == 0 {
		if err := shadowState(o.Shadow, a.Name, o.Now()); err != nil {
			return account{}, fmt.Errorf("%w: user %q %w", errUser, name, err)
		}
	}
	if gids, err := u.GroupIds(); err == nil {
		for _, g := range gids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				a.Groups = append(a.Groups, uint32(n))
			}
		}
	}
	return a, nil
}

// Account states of the shadow file.
var (
	errLocked  = errors.New("is locked")
	errExpired = errors.New("has expired")
)

// shadowState checks name's entry of the shadow file as OpenSSH does
// without PAM: a password field starting with "!" (passwd -l, usermod -L)
// or "*LK*" locks the account, and an expiry date (days since 1970) on or
// before today ends it. "*" alone (no password, keys only) is no lock. A
// missing file or entry leaves the account as it is; a file that cannot
// be read refuses everyone, as the state cannot be told.
func shadowState(path, name string, now time.Time) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot be checked: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 8 || fields[0] != name {
			continue
		}
		if strings.HasPrefix(fields[1], "!") || strings.HasPrefix(fields[1], "*LK*") {
			return errLocked
		}
		if fields[7] != "" {
			days, err := strconv.ParseInt(fields[7], 10, 64)
			if err == nil && days >= 0 && now.Unix()/86400 >= days {
				return errExpired
			}
		}
		return nil
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("cannot be checked: %w", err)
	}
	return nil
}

// shellOf reads a user's login shell from the passwd file (os/user does
// not expose it); "" when it is not there.
func shellOf(passwd, name string) string {
	f, err := os.Open(passwd)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Split(sc.Text(), ":")
		if len(fs) >= 7 && fs[0] == name {
			return fs[6]
		}
	}
	return ""
}

// env is the base environment of a's sessions.
func (a account) env() []string {
	return []string{"HOME=" + a.Home, "USER=" + a.Name, "LOGNAME=" + a.Name, "SHELL=" + a.Shell,
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
}

// acceptEnv reports whether a client may set the variable name to
// value: only the locale (LANG, LC_*) and TERM, as OpenSSH's AcceptEnv
// of Debian's default configuration, with values that are plain text.
// Anything else can change how the user's programs load or behave.
func acceptEnv(name, value string) bool {
	switch {
	case name == "TERM":
		return validTerm(value)
	case name == "LANG", strings.HasPrefix(name, "LC_") && len(name) > 3:
		for i, c := range name {
			if !(c == '_' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
				return false
			}
		}
		return len(value) <= 128 && !strings.ContainsFunc(value, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '/' })
	}
	return false
}

// validTerm reports whether t is a terminal type name terminfo could
// have: no path separators, no control characters.
func validTerm(t string) bool {
	if t == "" || len(t) > 64 || t[0] == '.' {
		return false
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '+') {
			return false
		}
	}
	return true
}

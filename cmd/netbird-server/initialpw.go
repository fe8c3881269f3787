package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// initialPasswordFile, in the data directory, holds the owner's one-time
// initial password until it is no longer needed: a file only the server's
// user (and root) can read, so the operator need not search logs for it.
const initialPasswordFile = "initial-password"

// writeInitialPassword records the owner's initial password, 0600. An
// existing file (a previous install's) is replaced.
func writeInitialPassword(dir string, id account.UserID, email, pw string) (string, error) {
	p := filepath.Join(dir, initialPasswordFile)
	if err := os.MkdirAll(dir, 0o700); err != nil { // absent with a Postgres store
		return "", fmt.Errorf("initial password file: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+initialPasswordFile+"-*")
	if err != nil {
		return "", fmt.Errorf("initial password file: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename; cleans up on failure
	body := fmt.Sprintf("# The owner's one-time initial password. This file is removed once the owner\n"+
		"# logs in or changes the password.\nemail: %s\npassword: %s\nuser_id: %s\n", email, pw, id)
	if _, err := tmp.WriteString(body); err != nil {
		tmp.Close()
		return "", fmt.Errorf("initial password file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("initial password file: %w", err)
	}
	// CreateTemp made it 0600 already.
	if err := os.Rename(tmp.Name(), p); err != nil {
		return "", fmt.Errorf("initial password file: %w", err)
	}
	return p, nil
}

// initialPassword is what the file records.
type initialPassword struct {
	user     account.UserID
	password string
}

func readInitialPassword(p string) (initialPassword, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return initialPassword{}, err
	}
	var ip initialPassword
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		switch {
		case !ok:
		case k == "password":
			ip.password = v
		case k == "user_id":
			ip.user = account.UserID(v)
		}
	}
	if ip.user == "" || ip.password == "" {
		return ip, fmt.Errorf("%s: no user_id or password line", p)
	}
	return ip, nil
}

// ownerLogin is what decides whether the initial password still matters:
// whether the user has logged in, and the current hash of its password.
// found is false when the user or its local login is gone.
type ownerLogin func(ctx context.Context, id account.UserID) (loggedIn bool, hash string, found bool, err error)

// storeOwnerLogin reads ownerLogin from the store.
func storeOwnerLogin(st *store.Store) ownerLogin {
	return func(ctx context.Context, id account.UserID) (loggedIn bool, hash string, found bool, err error) {
		err = st.Read(ctx, func(tx *store.Tx) error {
			u, err := tx.UserByID(ctx, id)
			if err != nil {
				return err
			}
			c, err := tx.Credential(ctx, id)
			if err != nil {
				return err
			}
			loggedIn, hash = !u.LastLogin.IsZero(), c.PasswordHash
			return nil
		})
		if errors.Is(err, store.ErrNotFound) {
			return false, "", false, nil
		}
		return loggedIn, hash, err == nil, err
	}
}

// pruneInitialPassword removes the initial password file once the owner
// has logged in, changed the password or is gone: the password then opens
// nothing, and the file should not outlive its use. It reports whether the
// file is (now) absent.
func pruneInitialPassword(ctx context.Context, dir string, login ownerLogin) (bool, error) {
	p := filepath.Join(dir, initialPasswordFile)
	ip, err := readInitialPassword(p)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	loggedIn, hash, found, err := login(ctx, ip.user)
	if err != nil {
		return false, fmt.Errorf("initial password file: the owner's login: %w", err)
	}
	if found && !loggedIn && bcrypt.CompareHashAndPassword([]byte(hash), []byte(ip.password)) == nil {
		return false, nil // still the way in
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("initial password file: %w", err)
	}
	return true, nil
}

// watchInitialPassword prunes the file now and then every interval until
// it is gone or ctx ends.
func watchInitialPassword(ctx context.Context, dir string, login ownerLogin, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		gone, err := pruneInitialPassword(ctx, dir, login)
		if err != nil && ctx.Err() == nil {
			log.Warn("initial password file", "dir", dir, "err", err)
		}
		if gone {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/wiremesh/wiremesh/management/account"
)

// TestInitialPassword: the owner's initial password is kept 0600 in the
// data directory while it is the way in, and removed once the owner has
// logged in, changed it, or is gone.
func TestInitialPassword(t *testing.T) {
	const pw = "0123456789abcdef0123A!7"
	hash, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	other, err := bcrypt.GenerateFromPassword([]byte("changed-Password-1!"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		loggedIn bool
		hash     string
		found    bool
		err      error
		keep     bool
		wantErr  bool
	}{
		{name: "unused", hash: string(hash), found: true, keep: true},
		{name: "logged in", loggedIn: true, hash: string(hash), found: true},
		{name: "password changed", hash: string(other), found: true},
		{name: "owner gone", found: false},
		{name: "store down", err: errors.New("connection refused"), keep: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data") // created as needed (a Postgres store has none)
			p, err := writeInitialPassword(dir, "u1", "admin@example.com", pw)
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(p)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("%s: %v %v, want 0600", p, fi.Mode(), err)
			}
			if b, _ := os.ReadFile(p); !strings.Contains(string(b), "password: "+pw+"\n") || !strings.Contains(string(b), "admin@example.com") {
				t.Fatalf("file holds:\n%s", b)
			}
			var asked account.UserID
			login := func(_ context.Context, id account.UserID) (bool, string, bool, error) {
				asked = id
				return tc.loggedIn, tc.hash, tc.found, tc.err
			}
			gone, err := pruneInitialPassword(context.Background(), dir, login)
			if (err != nil) != tc.wantErr || gone == tc.keep {
				t.Fatalf("prune: gone=%v err=%v, want keep=%v err=%v", gone, err, tc.keep, tc.wantErr)
			}
			if asked != "u1" {
				t.Fatalf("asked about user %q, want u1", asked)
			}
			if _, err := os.Stat(p); (err == nil) != tc.keep {
				t.Fatalf("file exists=%v, want %v", err == nil, tc.keep)
			}
			if entries, _ := os.ReadDir(dir); len(entries) > 1 {
				t.Fatalf("left behind: %v", entries)
			}
		})
	}
}

// TestInitialPasswordWatch: the watcher removes the file once the owner
// logs in and then ends; it ends with its context too.
func TestInitialPasswordWatch(t *testing.T) {
	dir := t.TempDir()
	const pw = "0123456789abcdef0123A!7"
	hash, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writeInitialPassword(dir, "u1", "a@example.com", pw); err != nil {
		t.Fatal(err)
	}
	var loggedIn atomic.Bool
	login := func(context.Context, account.UserID) (bool, string, bool, error) {
		return loggedIn.Load(), string(hash), true, nil
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchInitialPassword(context.Background(), dir, login, 10*time.Millisecond, log)
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, initialPasswordFile)); err != nil {
		t.Fatalf("removed before the owner logged in: %v", err)
	}
	loggedIn.Store(true)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("watcher did not end after removing the file")
	}
	if _, err := os.Stat(filepath.Join(dir, initialPasswordFile)); !os.IsNotExist(err) {
		t.Fatalf("file still there: %v", err)
	}
	// With the file in place and the owner not logged in, the context ends it.
	if _, err := writeInitialPassword(dir, "u1", "a@example.com", pw); err != nil {
		t.Fatal(err)
	}
	loggedIn.Store(false)
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan struct{})
	go func() { defer close(done); watchInitialPassword(ctx, dir, login, time.Hour, log) }()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("watcher outlived its context")
	}
}

package admin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/wiremesh/wiremesh/management/store"
)

// permissionHint is what an operator who ran a server or an admin command
// as the wrong user needs to read, instead of SQLite's "unable to open database file".
const permissionHint = "run as the user that owns the data directory, e.g. sudo"

// CheckDataDir explains up front why a SQLite store in c.DataDir cannot be
// opened for writing by this process: the servers, the admin commands and
// migrate all write (migrations, the activity log), and SQLite in WAL mode
// also creates store.db-wal and store.db-shm next to the file. Other
// problems are left to the store's own error.
func CheckDataDir(c store.Config) error {
	if c.Engine != store.SQLite && c.Engine != "" {
		return nil
	}
	path := filepath.Join(c.DataDir, store.FileName)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	switch {
	case err == nil:
		f.Close()
	case errors.Is(err, fs.ErrNotExist):
		// Not created yet: the directory must take it (checked below).
	default:
		return explainOpen(path, err)
	}
	if _, err := os.Stat(c.DataDir); errors.Is(err, fs.ErrNotExist) {
		return nil // a first run: the store creates the directory
	} else if err != nil {
		return explainOpen(path, err)
	}
	// access(2) with the real user, as the process runs: the directory
	// must let us create the WAL files.
	if err := unix.Access(c.DataDir, unix.W_OK|unix.X_OK); err != nil {
		return explainOpen(path, &fs.PathError{Op: "open", Path: c.DataDir, Err: err})
	}
	return nil
}

// explainOpen words an error opening the store file; a permission error
// gets the hint.
func explainOpen(path string, err error) error {
	if errors.Is(err, fs.ErrPermission) {
		// The other way out: give the directory to the user this runs as,
		// e.g. a volume from the root-run 0.1.0 image under today's
		// unprivileged one.
		dir := filepath.Dir(path)
		return fmt.Errorf("cannot open %s: permission denied (%s); or hand the data directory to this user (uid %d): chown -R %d:%d %s: %w",
			path, permissionHint, os.Geteuid(), os.Geteuid(), os.Getegid(), dir, err)
	}
	return fmt.Errorf("cannot open %s: %w", path, err)
}

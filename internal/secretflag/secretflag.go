// Package secretflag lets a secret given as a command-line flag also come
// from a file (--NAME-file) or an environment variable, so it need not
// appear in the process list (ps shows every argument to every user).
// It reads files; it does not store, generate or rotate secrets.
package secretflag

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/wiremesh/wiremesh/internal/flagconf"
)

// Secret is one secret flag with its file and environment alternatives.
type Secret struct {
	fs     *pflag.FlagSet
	name   string
	env    string
	target *string
	file   string
}

// File registers --NAME-file beside the existing string flag NAME (whose
// value lands in target). env, when not empty, is read when neither flag
// is given, and env+"_FILE" names a file the same way.
func File(fs *pflag.FlagSet, name, env string, target *string) *Secret {
	s := &Secret{fs: fs, name: name, env: env, target: target}
	usage := "file holding --" + name + " (keeps it out of ps)"
	if env != "" {
		usage += "; env " + env + "_FILE"
	}
	fs.StringVar(&s.file, name+"-file", "", usage)
	if env != "" {
		// The names this secret was read from before every flag had its
		// NB_<NAME> variable keep working through flagconf.
		flagconf.EnvAlias(fs, name, env)
		flagconf.EnvAlias(fs, name+"-file", env+"_FILE")
	}
	return s
}

// Resolve sets target from, in order: --NAME, --NAME-file, env, env_FILE.
// Giving both the flag and the file is an error, as is an empty or
// unreadable file.
func (s *Secret) Resolve() error {
	set := s.fs.Changed(s.name)
	switch {
	case set && s.file != "":
		return fmt.Errorf("--%s and --%s-file both given: use one", s.name, s.name)
	case set:
		return nil
	case s.file != "":
		return s.read("--"+s.name+"-file", s.file)
	case s.env == "":
		return nil
	}
	if v := os.Getenv(s.env); v != "" {
		*s.target = v
		return nil
	}
	if p := os.Getenv(s.env + "_FILE"); p != "" {
		return s.read(s.env+"_FILE", p)
	}
	return nil
}

func (s *Secret) read(from, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return fmt.Errorf("%s: %s: %w", from, path, errEmpty)
	}
	*s.target = v
	return nil
}

var errEmpty = errors.New("file is empty")

// Given reports whether --NAME or --NAME-file was given.
func (s *Secret) Given() bool { return s.fs.Changed(s.name) || s.file != "" }

// ResolveAll resolves each secret, stopping at the first error.
func ResolveAll(secrets ...*Secret) error {
	for _, s := range secrets {
		if err := s.Resolve(); err != nil {
			return err
		}
	}
	return nil
}

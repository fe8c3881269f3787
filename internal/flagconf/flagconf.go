// Package flagconf fills the flags a server command was not given on its
// command line from NB_* environment variables and then from a YAML config
// file (--config), so that every setting, secrets included, can stay off the
// command line (which every local user sees in ps).
//
// Precedence: command line, then environment, then config file, then the
// flag's default. The environment variable of flag --some-name is
// NB_SOME_NAME; a flag may also keep older names (EnvAlias). The config
// file's keys are the long flag names. A secret flag X and its file twin
// X-file (internal/secretflag) count as one setting: the layer that gives
// either of them wins, and one layer giving both is refused.
//
// It parses and assigns values only: what a value means, and whether a
// combination of settings makes sense, is checked by the code that owns
// the flag. It does not watch the file or reload it.
package flagconf

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// ConfigFlag is the flag naming the config file; its environment variable
// is NB_CONFIG.
const ConfigFlag = "config"

// EnvPrefix starts every environment variable this package reads.
const EnvPrefix = "NB_"

// Flag annotations this package reads (set by EnvAlias and MarkSecret).
const (
	annotEnv    = "flagconf_env"
	annotSecret = "flagconf_secret"
	annotEmpty  = "flagconf_empty"
)

// skipped are cobra's own flags: no environment variable or key sets them.
var skipped = []string{"help", "version", ConfigFlag}

// LookupEnv is os.LookupEnv's shape, injected so tests need no process
// environment.
type LookupEnv func(string) (string, bool)

// EnvName is the environment variable of the flag called name.
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// EnvAlias declares older environment variable names of a flag, read when
// NB_<NAME> is not set (e.g. NB_STORE_ENGINE for --store). Names equal to
// NB_<NAME> are ignored. A flag that does not exist is a programming error
// and panics, as pflag does for a duplicate flag.
func EnvAlias(fs *pflag.FlagSet, flag string, env ...string) {
	f := mustLookup(fs, flag)
	for _, e := range env {
		if e != EnvName(flag) && !slices.Contains(f.Annotations[annotEnv], e) {
			must(fs.SetAnnotation(flag, annotEnv, append(f.Annotations[annotEnv], e)))
		}
	}
}

// MarkSecret declares a flag secret (beyond the names isSecret recognises):
// its value is never shown in errors, and a config file holding it must be
// private to its owner.
func MarkSecret(fs *pflag.FlagSet, flag string) {
	mustLookup(fs, flag)
	must(fs.SetAnnotation(flag, annotSecret, []string{"true"}))
}

// AllowEmpty declares that an empty environment variable is a value for
// this flag (e.g. NB_ACME_HTTP_LISTEN= turns the listener off) rather than
// unset, as it is for other flags.
func AllowEmpty(fs *pflag.FlagSet, flag string) {
	mustLookup(fs, flag)
	must(fs.SetAnnotation(flag, annotEmpty, []string{"true"}))
}

func mustLookup(fs *pflag.FlagSet, name string) *pflag.Flag {
	f := fs.Lookup(name)
	if f == nil {
		panic("flagconf: no flag --" + name)
	}
	return f
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// Option adjusts how Install reads cmd's flags.
type Option func(*pflag.FlagSet)

// EmptyEnv is AllowEmpty for Install: the flags named take an empty
// environment variable as their value.
func EmptyEnv(flags ...string) Option {
	return func(fs *pflag.FlagSet) {
		for _, f := range flags {
			AllowEmpty(fs, f)
		}
	}
}

// Install registers --config on cmd and applies the environment and the
// config file to cmd's flags after the command line is parsed, before cmd
// runs (a PreRunE, chained before any PreRunE cmd already has).
func Install(cmd *cobra.Command, lookup LookupEnv, opts ...Option) {
	for _, o := range opts {
		o(cmd.Flags())
	}
	cmd.Flags().String(ConfigFlag, "", "YAML `FILE` of settings whose keys are the long flag names, e.g. \"log-level: debug\" (env NB_CONFIG); every flag --X is also read from env NB_X (upper case, '-' as '_'); the command line wins over the environment, which wins over the file")
	prevE, prev := cmd.PreRunE, cmd.PreRun
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if err := Apply(c.Flags(), lookup); err != nil {
			return err
		}
		switch {
		case prevE != nil:
			return prevE(c, args)
		case prev != nil:
			prev(c, args)
		}
		return nil
	}
}

// Apply fills the flags of fs not given on the command line from the
// environment and then from the config file named by --config or
// NB_CONFIG. Nothing is assigned when it fails.
func Apply(fs *pflag.FlagSet, lookup LookupEnv) error {
	return applier{fs: fs, lookup: lookup, euid: os.Geteuid()}.apply()
}

type applier struct {
	fs     *pflag.FlagSet
	lookup LookupEnv
	euid   int // owner a config file holding secrets may have, besides root
}

// assignment is one value bound for one flag.
type assignment struct {
	flag   *pflag.Flag
	from   string   // "NB_X" or "config FILE: line N: key x", for errors
	values []string // one value, or a list's items
	list   bool     // values is a whole list (Replace), not one string (Set)
}

func (a applier) apply() error {
	file, err := a.loadFile()
	if err != nil {
		return err
	}
	var todo []assignment
	var applyErr error
	for _, g := range a.groups() {
		as, err := a.resolve(g, file)
		if err != nil {
			applyErr = errors.Join(applyErr, err)
			continue
		}
		todo = append(todo, as...)
	}
	if applyErr != nil {
		return applyErr
	}
	// A value that does not parse undoes the ones assigned before it:
	// either all of them are applied or none.
	var undo []func()
	for _, as := range todo {
		// pflag's numeric values are overwritten even by a failed Set.
		undo = append(undo, snapshot(as.flag))
		if err := as.assign(a.secret(as.flag)); err != nil {
			applyErr = errors.Join(applyErr, err)
		}
	}
	if applyErr != nil {
		for _, u := range slices.Backward(undo) {
			u()
		}
	}
	return applyErr
}

// snapshot returns a function putting f's value and Changed back.
func snapshot(f *pflag.Flag) func() {
	changed := f.Changed
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		old := slices.Clone(sv.GetSlice())
		return func() { _ = sv.Replace(old); f.Changed = changed }
	}
	old := f.Value.String()
	return func() { _ = f.Value.Set(old); f.Changed = changed }
}

// groups returns the configurable flags, a secret X together with X-file.
func (a applier) groups() [][]*pflag.Flag {
	var out [][]*pflag.Flag
	a.fs.VisitAll(func(f *pflag.Flag) {
		if slices.Contains(skipped, f.Name) {
			return
		}
		if base, ok := strings.CutSuffix(f.Name, "-file"); ok && a.fs.Lookup(base) != nil {
			return // grouped with its base below
		}
		g := []*pflag.Flag{f}
		if twin := a.fs.Lookup(f.Name + "-file"); twin != nil {
			g = append(g, twin)
		}
		out = append(out, g)
	})
	return out
}

// resolve picks the layer giving group g its value: none when a member was
// on the command line, else the environment, else the file.
func (a applier) resolve(g []*pflag.Flag, file *configFile) ([]assignment, error) {
	for _, f := range g {
		if f.Changed {
			return nil, nil
		}
	}
	var fromEnv []assignment
	for _, f := range g {
		as, ok, err := a.env(f)
		if err != nil {
			return nil, err
		}
		if ok {
			fromEnv = append(fromEnv, as)
		}
	}
	if len(fromEnv) > 1 {
		return nil, fmt.Errorf("%s and %s both set: use one", fromEnv[0].from, fromEnv[1].from)
	}
	if len(fromEnv) == 1 {
		return fromEnv, nil
	}
	if file == nil {
		return nil, nil
	}
	var fromFile []assignment
	for _, f := range g {
		if e, ok := file.entries[f.Name]; ok {
			fromFile = append(fromFile, assignment{flag: f, from: file.where(f.Name, e), values: e.values, list: e.list})
		}
	}
	if len(fromFile) > 1 {
		return nil, fmt.Errorf("config %s: keys %s and %s both given: use one", file.path, fromFile[0].flag.Name, fromFile[1].flag.Name)
	}
	for _, as := range fromFile {
		if as.list && !isSlice(as.flag) {
			return nil, fmt.Errorf("%s: --%s takes one value, not a list", as.from, as.flag.Name)
		}
	}
	return fromFile, nil
}

// env looks f up under NB_<NAME> and its aliases. An empty variable counts
// as unset, as compose files set them to "" when a value is missing,
// unless the flag allows empty values (AllowEmpty).
func (a applier) env(f *pflag.Flag) (assignment, bool, error) {
	var found []string
	var value string
	emptyOK := len(f.Annotations[annotEmpty]) > 0
	for _, name := range append([]string{EnvName(f.Name)}, f.Annotations[annotEnv]...) {
		if v, ok := a.lookup(name); ok && (v != "" || emptyOK) {
			if len(found) > 0 && v != value {
				return assignment{}, false, fmt.Errorf("%s and %s both set to different values (both are --%s): use one", found[0], name, f.Name)
			}
			found, value = append(found, name), v
		}
	}
	if len(found) == 0 {
		return assignment{}, false, nil
	}
	return assignment{flag: f, from: found[0], values: []string{value}}, true, nil
}

// assign sets the flag and marks it given, so that code that asks whether
// the user set a flag (pflag's Changed) sees a configured value as set.
func (as assignment) assign(secret bool) error {
	f := as.flag
	var err error
	switch sv, ok := f.Value.(pflag.SliceValue); {
	case ok && as.list:
		err = sv.Replace(as.values)
	case ok:
		// One string for a list flag: comma-separated items.
		err = sv.Replace(splitList(as.values[0]))
	default:
		err = f.Value.Set(as.values[0])
	}
	if err != nil {
		if secret {
			return fmt.Errorf("%s: invalid value for --%s", as.from, f.Name) // the value is not shown
		}
		return fmt.Errorf("%s: invalid value for --%s: %w", as.from, f.Name, err)
	}
	f.Changed = true
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func isSlice(f *pflag.Flag) bool {
	_, ok := f.Value.(pflag.SliceValue)
	return ok
}

// secretSuffixes name secret string flags by convention (not a bool such
// as --oidc-use-id-token); a flag with an X-file twin (internal/secretflag)
// or marked with MarkSecret is secret too.
var secretSuffixes = []string{"-secret", "-password", "-dsn", "-key", "-token"}

func (a applier) secret(f *pflag.Flag) bool {
	if len(f.Annotations[annotSecret]) > 0 || a.fs.Lookup(f.Name+"-file") != nil {
		return true
	}
	if f.Value.Type() != "string" {
		return false
	}
	for _, s := range secretSuffixes {
		if strings.HasSuffix(f.Name, s) {
			return true
		}
	}
	return false
}

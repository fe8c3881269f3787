package flagconf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"
)

// maxFileSize bounds the config file read: settings are a few kilobytes.
const maxFileSize = 1 << 20

// entry is one key's value in the file.
type entry struct {
	line   int
	values []string // the scalar, or the list's items
	list   bool
}

// configFile is a parsed config file.
type configFile struct {
	path    string
	entries map[string]entry
}

func (c *configFile) where(key string, e entry) string {
	return fmt.Sprintf("config %s: line %d: %s", c.path, e.line, key)
}

// ErrSyntax is wrapped by every error about the file's YAML itself.
var ErrSyntax = errors.New("not a flat YAML map of flag names to values")

// configPath is --config, else NB_CONFIG, else "" (no file).
func (a applier) configPath() string {
	f := a.fs.Lookup(ConfigFlag)
	if f == nil {
		return ""
	}
	if f.Changed {
		return f.Value.String()
	}
	if v, ok := a.lookup(EnvName(ConfigFlag)); ok {
		return v
	}
	return ""
}

// loadFile reads, parses and checks the config file; nil when none is
// named.
func (a applier) loadFile() (*configFile, error) {
	path := a.configPath()
	if path == "" {
		return nil, nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", ConfigFlag, err)
	}
	defer fh.Close()
	// The checks look at the file opened, not at whatever the path names
	// by the time it is read.
	fi, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", ConfigFlag, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("--%s %s: not a regular file", ConfigFlag, path)
	}
	data, err := io.ReadAll(io.LimitReader(fh, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", ConfigFlag, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("config %s: larger than %d bytes", path, maxFileSize)
	}
	entries, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c := &configFile{path: path, entries: entries}
	if err := a.checkKeys(c); err != nil {
		return nil, err
	}
	return c, a.checkFile(c, fi)
}

// checkKeys refuses keys that name no flag.
func (a applier) checkKeys(c *configFile) error {
	var errs []error
	for _, key := range c.sortedKeys() {
		if f := a.fs.Lookup(key); f != nil && !slices.Contains(skipped, key) {
			continue
		}
		msg := fmt.Sprintf("config %s: line %d: unknown key %q", c.path, c.entries[key].line, key)
		if alt := strings.ReplaceAll(key, "_", "-"); alt != key && a.fs.Lookup(alt) != nil {
			msg += fmt.Sprintf(" (did you mean %q? keys are the flag names)", alt)
		} else {
			msg += " (keys are the long flag names shown by --help)"
		}
		errs = append(errs, errors.New(msg))
	}
	return errors.Join(errs...)
}

// checkFile refuses a file someone else controls: one others can write,
// one belonging to a user other than this one or root (its owner can chmod
// and rewrite it at will, pointing --agent-dir at binaries agents install
// or --acme-directory at another CA), one in a directory others can write
// (they can replace it), and one holding a secret that others can read.
func (a applier) checkFile(c *configFile, fi os.FileInfo) error {
	if !modesMeaningful {
		return nil
	}
	if m := fi.Mode().Perm(); m&0o022 != 0 {
		return fmt.Errorf("config %s is writable by group or others (mode %04o): whoever can write it controls this server; run chmod go-w %s", c.path, m, c.path)
	}
	if uid, ok := fileOwner(fi); ok && uid != a.euid && uid != 0 {
		return fmt.Errorf("config %s belongs to uid %d, neither this user (uid %d) nor root: whoever owns it controls this server; run chown root %s", c.path, uid, a.euid, c.path)
	}
	if err := a.checkDir(filepath.Dir(c.path)); err != nil {
		return fmt.Errorf("config %s: %w", c.path, err)
	}
	for _, key := range c.sortedKeys() {
		if !a.secret(a.fs.Lookup(key)) {
			continue
		}
		if m := fi.Mode().Perm(); m&0o077 != 0 {
			return fmt.Errorf("config %s holds the secret %q but is readable by group or others (mode %04o): run chmod 600 %s, or give the secret in a file (%s-file) or the environment (%s)",
				c.path, key, m, c.path, key, EnvName(key))
		}
	}
	return nil
}

// checkDir refuses a directory in which someone else could replace the
// config file: writable by group or others without the sticky bit (which
// keeps others from renaming or deleting files they do not own, as in
// /tmp), or owned by another user.
func (a applier) checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("its directory: %w", err)
	}
	if m := fi.Mode(); m.Perm()&0o022 != 0 && m&os.ModeSticky == 0 {
		return fmt.Errorf("its directory %s is writable by group or others (mode %04o): they can replace the file; run chmod go-w %s", dir, m.Perm(), dir)
	}
	if uid, ok := fileOwner(fi); ok && uid != a.euid && uid != 0 {
		return fmt.Errorf("its directory %s belongs to uid %d, neither this user (uid %d) nor root: its owner can replace the file; run chown root %s", dir, uid, a.euid, dir)
	}
	return nil
}

func (c *configFile) sortedKeys() []string {
	keys := make([]string, 0, len(c.entries))
	for k := range c.entries {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y string) int { return c.entries[x].line - c.entries[y].line })
	return keys
}

// parse reads a config file: one YAML document holding a map from names to
// a scalar or a list of scalars. Duplicate keys, nesting, aliases, empty
// values and more than one document are refused. Values are returned as
// written (the flag parses them); errors never quote a value.
func parse(data []byte) (map[string]entry, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) {
		return map[string]entry{}, nil // empty, or only comments
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSyntax, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: more than one YAML document (---)", ErrSyntax)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) != 1 {
			return nil, fmt.Errorf("%w: empty document", ErrSyntax)
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return map[string]entry{}, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w: line %d: the file must be a map of key: value lines", ErrSyntax, root.Line)
	}
	out := make(map[string]entry, len(root.Content)/2)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Value == "" || k.Tag == "!!null" {
			return nil, fmt.Errorf("%w: line %d: a key must be a flag name", ErrSyntax, k.Line)
		}
		if prev, dup := out[k.Value]; dup {
			return nil, fmt.Errorf("%w: line %d: key %q given twice (first on line %d)", ErrSyntax, k.Line, k.Value, prev.line)
		}
		e, err := value(k.Value, v)
		if err != nil {
			return nil, err
		}
		e.line = k.Line
		out[k.Value] = e
	}
	return out, nil
}

func value(key string, v *yaml.Node) (entry, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return entry{}, fmt.Errorf("%w: line %d: key %q has no value (remove it for the default, or quote \"\" for an empty string)", ErrSyntax, v.Line, key)
		}
		return entry{values: []string{v.Value}}, nil
	case yaml.SequenceNode:
		e := entry{list: true, values: []string{}}
		for _, item := range v.Content {
			if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
				return entry{}, fmt.Errorf("%w: line %d: %q: list items must be plain values", ErrSyntax, item.Line, key)
			}
			e.values = append(e.values, item.Value)
		}
		return e, nil
	case yaml.MappingNode:
		return entry{}, fmt.Errorf("%w: line %d: %q: nested maps are not settings (keys are the flag names, e.g. smtp-host)", ErrSyntax, v.Line, key)
	case yaml.AliasNode:
		return entry{}, fmt.Errorf("%w: line %d: %q: YAML aliases are not supported", ErrSyntax, v.Line, key)
	}
	return entry{}, fmt.Errorf("%w: line %d: %q: unsupported value", ErrSyntax, v.Line, key)
}

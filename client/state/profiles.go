package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// DefaultProfile is the profile kept in the state directory's config.json,
// where a single-profile install has it.
const DefaultProfile = "default"

// Profiles are several servers or accounts side by side, each with its own
// key and settings: "default" in DIR/config.json, others in
// DIR/profiles/NAME/config.json; DIR/active_profile names the one in use.
type Profiles struct{ Dir string }

var profileName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ErrNoProfile is returned for a profile that does not exist.
var ErrNoProfile = errors.New("no such profile")

func checkName(name string) error {
	if !profileName.MatchString(name) || strings.Contains(name, "..") {
		return fmt.Errorf("profile name %q: use 1-64 letters, digits, '.', '_' or '-'", name)
	}
	return nil
}

// Path is the config file of a profile.
func (p Profiles) Path(name string) string {
	if name == DefaultProfile {
		return filepath.Join(p.Dir, "config.json")
	}
	return filepath.Join(p.Dir, "profiles", name, "config.json")
}

// Exists reports whether the profile has been created (default always has).
func (p Profiles) Exists(name string) bool {
	if name == DefaultProfile {
		return true
	}
	_, err := os.Stat(p.Path(name))
	return err == nil
}

// Active is the selected profile (default when none was selected).
func (p Profiles) Active() string {
	b, err := os.ReadFile(filepath.Join(p.Dir, "active_profile"))
	if err != nil {
		return DefaultProfile
	}
	name := strings.TrimSpace(string(b))
	if checkName(name) != nil || !p.Exists(name) {
		return DefaultProfile
	}
	return name
}

// SetActive selects a profile.
func (p Profiles) SetActive(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if !p.Exists(name) {
		return fmt.Errorf("%w %q (create it with: netbird profile add %s)", ErrNoProfile, name, name)
	}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(p.Dir, "active_profile.tmp")
	if err := os.WriteFile(tmp, []byte(name+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(p.Dir, "active_profile"))
}

// Add creates a profile with a fresh WireGuard key.
func (p Profiles) Add(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if p.Exists(name) {
		return fmt.Errorf("profile %q already exists", name)
	}
	_, err := Load(p.Path(name))
	return err
}

// Remove deletes a profile and its state; the active profile and the
// default one stay.
func (p Profiles) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	switch {
	case name == DefaultProfile:
		return errors.New("the default profile cannot be removed")
	case !p.Exists(name):
		return fmt.Errorf("%w %q", ErrNoProfile, name)
	case p.Active() == name:
		return fmt.Errorf("profile %q is in use: select another first (netbird profile select NAME)", name)
	}
	return os.RemoveAll(filepath.Dir(p.Path(name)))
}

// List returns every profile name, default first.
func (p Profiles) List() []string {
	out := []string{DefaultProfile}
	ents, _ := os.ReadDir(filepath.Join(p.Dir, "profiles"))
	var more []string
	for _, e := range ents {
		if e.IsDir() && checkName(e.Name()) == nil && p.Exists(e.Name()) {
			more = append(more, e.Name())
		}
	}
	sort.Strings(more)
	return append(out, more...)
}

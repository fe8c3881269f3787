package hostdns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// stateFile is the record, in the agent's state directory, of the host's
// resolver being the agent's: written before a change, removed after the
// restore, so whatever finds it at start knows what a crash left.
const stateFile = "hostdns.json"

type stateRecord struct {
	Mode Mode `json:"mode"`
	// Also are further modes whose changes may be in place (an undo that
	// failed before the agent moved on to the next mode).
	Also      []Mode `json:"also,omitempty"`
	Interface string `json:"interface,omitempty"`
	HostsPath string `json:"hosts_path,omitempty"`
}

func (h *Host) statePath() string {
	if h.o.StateDir == "" {
		return ""
	}
	return filepath.Join(h.o.StateDir, stateFile)
}

func (h *Host) record(r stateRecord) error {
	p := h.statePath()
	if p == "" {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("record host DNS state: %w", err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("record host DNS state: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("record host DNS state: %w", err)
	}
	return nil
}

func (h *Host) forget() error {
	p := h.statePath()
	if p == "" {
		return nil
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return nil
}

// Recover undoes what an earlier run left applied (it crashed, or was
// killed): the record in the state directory names the mode, and
// resolv.conf's backup is restored whatever the record says. It reports
// the mode it restored (ModeNone when there was nothing to do).
func Recover(ctx context.Context, o Options) (Mode, error) {
	if o.Bus == nil {
		o.Bus = SystemBus
	}
	h := &Host{o: o}
	var restored Mode
	// A backup of resolv.conf means its rewrite is still in place, with or
	// without a record (runs before this package kept one).
	if o.ResolvConf.Path != "" {
		ok, err := o.ResolvConf.Restore()
		if err != nil {
			return ModeNone, fmt.Errorf("restore %s: %w", o.ResolvConf.Path, err)
		}
		if ok {
			restored = ModeResolvConf
		}
	}
	p := h.statePath()
	if p == "" {
		return restored, nil
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return restored, nil
	}
	if err != nil {
		return restored, fmt.Errorf("read %s: %w", p, err)
	}
	var r stateRecord
	if err := json.Unmarshal(b, &r); err != nil {
		// A record that cannot be read cannot be acted on: drop it rather
		// than fail every start.
		_ = h.forget()
		return restored, fmt.Errorf("unreadable %s (removed): %w", p, err)
	}
	ro := o
	ro.Interface, ro.HostsPath = r.Interface, r.HostsPath
	var errs []error
	var left []Mode
	for _, m := range append([]Mode{r.Mode}, r.Also...) {
		if m == ModeResolvConf {
			restored = ModeResolvConf // restored above
			continue
		}
		cf := newConfigurator(m, ro)
		if cf == nil {
			continue
		}
		if err := cf.restore(ctx); err != nil {
			errs = append(errs, fmt.Errorf("undo the %s settings of an earlier run: %w", m, err))
			left = append(left, m)
			continue
		}
		if restored == ModeNone || m == r.Mode {
			restored = m
		}
	}
	if len(left) > 0 {
		// Keep what could not be undone for the next start.
		r.Mode, r.Also = left[0], left[1:]
		if err := h.record(r); err != nil {
			errs = append(errs, err)
		}
		return restored, errors.Join(errs...)
	}
	return restored, h.forget()
}

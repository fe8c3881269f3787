package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/wiremesh/wiremesh/management/account"
)

// ChangeChannel is the Postgres notification channel on which every
// committed serial bump is announced as "SERIAL:ACCOUNT".
const ChangeChannel = "wiremesh_changes"

// ErrNoListen means the engine cannot announce changes (SQLite: one
// management process, and the admin command, whose changes are polled).
var ErrNoListen = errors.New("store: this engine does not announce changes")

func changePayload(id account.ID, serial uint64) string {
	return strconv.FormatUint(serial, 10) + ":" + string(id)
}

// ParseChange decodes a ChangeChannel payload.
func ParseChange(payload string) (account.ID, uint64, error) {
	s, id, ok := strings.Cut(payload, ":")
	if !ok || id == "" {
		return "", 0, fmt.Errorf("change notification %q: want SERIAL:ACCOUNT", payload)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("change notification %q: %w", payload, err)
	}
	return account.ID(id), n, nil
}

// Listen calls fn with every account change that any process sharing the
// store commits, from the moment ready is called until ctx ends (nil) or
// the connection breaks (an error: listen again, and look for what was
// missed meanwhile). fn runs on Listen's goroutine and should not block.
func (s *Store) Listen(ctx context.Context, ready func(), fn func(account.ID, uint64)) error {
	pg, ok := s.eng.(*pgEngine)
	if !ok {
		return ErrNoListen
	}
	c, err := pg.p.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// A listening connection must not go back to the pool.
	conn := c.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+ChangeChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("listen: %w", err)
		}
		id, serial, err := ParseChange(n.Payload)
		if err != nil {
			continue // not ours to act on
		}
		fn(id, serial)
	}
}

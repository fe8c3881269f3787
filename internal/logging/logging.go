// Package logging builds the slog logger each binary's main passes down.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// New returns a text logger at level ("debug", "info", "warn", "error").
func New(w io.Writer, level string) (*slog.Logger, error) {
	log, _, err := NewLeveled(w, level)
	return log, err
}

// NewLeveled is New with the level held in a LevelVar, so a running
// process can change it (the agent raises it to debug while it collects a
// debug bundle).
func NewLeveled(w io.Writer, level string) (*slog.Logger, *slog.LevelVar, error) {
	l, err := ParseLevel(level)
	if err != nil {
		return nil, nil, err
	}
	lv := new(slog.LevelVar)
	lv.Set(l)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lv})), lv, nil
}

// ParseLevel reads a level name ("debug", "info", "warn", "error").
func ParseLevel(level string) (slog.Level, error) {
	var l slog.Level
	switch strings.ToLower(level) {
	case "debug", "trace":
		l = slog.LevelDebug
	case "", "info":
		l = slog.LevelInfo
	case "warn", "warning":
		l = slog.LevelWarn
	case "error", "panic", "fatal":
		l = slog.LevelError
	default:
		return 0, fmt.Errorf("unknown log level %q (want debug, info, warn or error)", level)
	}
	return l, nil
}

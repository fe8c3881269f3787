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
		return nil, fmt.Errorf("unknown log level %q (want debug, info, warn or error)", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

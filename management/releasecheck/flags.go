package releasecheck

import (
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/wiremesh/wiremesh/internal/version"
)

// Flags holds --version-check-url, shared by netbird-server and
// netbird-mgmt.
type Flags struct{ url string }

// Bind registers --version-check-url on fs.
func Bind(fs *pflag.FlagSet) *Flags {
	f := &Flags{}
	fs.StringVar(&f.url, "version-check-url", "", "URL of a release feed (JSON {\"management\":\"X.Y.Z\",\"dashboard\":\"X.Y.Z\"}, a GitHub latest-release answer, or a plain-text version) "+
		"fetched at most every 6 h so GET /api/instance/version can report available updates; off by default: the server then calls out nowhere and reports the available versions as unknown")
	return f
}

// Checker resolves the flag: nil (off) when no URL is given.
func (f *Flags) Checker(log *slog.Logger) (*Checker, error) {
	return New(Options{URL: f.url, Log: log, UserAgent: "wiremesh-management/" + version.Version})
}

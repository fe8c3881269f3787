package engine

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/wiremesh/wiremesh/client/debugbundle"
	"github.com/wiremesh/wiremesh/client/jobs"
)

// runJobs follows management's Job stream (remote debug bundles) once the
// Sync stream has delivered, as the reference client does, until ctx ends.
func (e *Engine) runJobs(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-e.synced:
	}
	up := debugbundle.NewUploader(e.o.Management.URL, e.o.Management.TLSConfig())
	defer up.Close()
	src := e.bundleSource()
	r := jobs.New(jobs.Options{
		Open: func(ctx context.Context) (jobs.Stream, error) { return e.mgmt.Jobs(ctx) },
		Build: func(ctx context.Context, o debugbundle.Options, w io.Writer) (debugbundle.Result, error) {
			return debugbundle.Build(ctx, src, o, w)
		},
		Uploader: up,
		Log:      e.log.With("component", "jobs"),
	})
	if err := r.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		e.log.Warn("job stream stopped", "err", err)
	}
}

// bundleSource is Options.Bundle with the engine's secrets, or the
// engine's own status when the caller gave none.
func (e *Engine) bundleSource() debugbundle.Source {
	var src debugbundle.Source
	if e.o.Bundle != nil {
		src = *e.o.Bundle
	}
	if src.Version == "" {
		src.Version = "netbird " + e.o.Version
	}
	if src.Status == nil {
		src.Status = func(context.Context) ([]byte, error) { return json.MarshalIndent(e.Status(), "", "  ") }
	}
	if src.Log == nil {
		src.Log = e.log
	}
	src.Secrets = append(append([]string(nil), src.Secrets...), e.o.Private.String(), e.o.SetupKey)
	return src
}

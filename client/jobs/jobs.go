// Package jobs runs the jobs the management server sends over the Job
// stream: today remote debug bundles, built with debugbundle and uploaded
// to the management server. It runs one job at a time with a short queue
// (further jobs are answered "busy"), reconnects the stream with backoff
// when it drops, and stops for good when the server does not implement
// jobs. It does not build bundles itself nor speak gRPC: the stream, the
// bundle builder and the uploader are handed in.
package jobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/client/debugbundle"
	"github.com/wiremesh/wiremesh/client/mgmtclient"
)

// Stream is an open Job stream (mgmtclient.JobStream).
type Stream interface {
	Recv() (mgmtclient.Job, error)
	Send(mgmtclient.JobResult) error
}

// Uploader stores a finished bundle and returns its key
// (debugbundle.Uploader).
type Uploader interface {
	Upload(ctx context.Context, id []byte, bundle []byte) (string, error)
}

// BuildFunc builds a bundle into w (debugbundle.Build with the daemon's
// source).
type BuildFunc func(ctx context.Context, o debugbundle.Options, w io.Writer) (debugbundle.Result, error)

// ErrNotAccepted is the server refusing this peer's Job stream
// (PermissionDenied): the Sync stream sees the same and restarts the
// engine.
var ErrNotAccepted = errors.New("the management server refused the job stream")

// Reasons of failed jobs that are not errors of the job itself.
const (
	ReasonBusy        = "busy: another job is running and the queue is full, try again later"
	ReasonUnsupported = "this agent does not support this job type"
)

// Options configure a Runner.
type Options struct {
	// Open opens the Job stream (after its handshake); the stream ends
	// with ctx.
	Open     func(ctx context.Context) (Stream, error)
	Build    BuildFunc
	Uploader Uploader
	// Queue is how many jobs may wait behind the running one (default 1).
	Queue int
	// MinBackoff and MaxBackoff bound the wait between reconnects
	// (defaults 800 ms and 10 s, as the reference client).
	MinBackoff, MaxBackoff time.Duration
	// JobTimeout bounds one job beyond its collection time (default 10 min).
	JobTimeout time.Duration
	Log        *slog.Logger
}

// Runner follows the Job stream and runs its jobs.
type Runner struct {
	o Options
}

// New returns a runner.
func New(o Options) *Runner {
	if o.Queue <= 0 {
		o.Queue = 1
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 800 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(10*time.Second, o.MinBackoff)
	}
	if o.JobTimeout <= 0 {
		o.JobTimeout = 10 * time.Minute
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Runner{o: o}
}

// Run follows the stream until ctx ends (nil), the server does not
// implement jobs (nil) or refuses this peer (ErrNotAccepted). Every
// goroutine it starts has ended when it returns.
func (r *Runner) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	l := &loop{
		queue:    make(chan mgmtclient.Job, r.o.Queue),
		results:  make(chan mgmtclient.JobResult, r.o.Queue+1), // never more than the jobs in flight
		inflight: map[string]bool{},
	}
	wg.Add(1)
	go func() { defer wg.Done(); r.work(ctx, l.queue, l.results) }()
	backoff := r.o.MinBackoff
	for {
		start := time.Now()
		err := r.session(ctx, l)
		if ctx.Err() != nil {
			return nil
		}
		switch status.Code(err) {
		case codes.Unimplemented:
			r.o.Log.Info("the management server runs no jobs (no remote debug bundles)")
			return nil
		case codes.PermissionDenied:
			return fmt.Errorf("%w: %s", ErrNotAccepted, status.Convert(err).Message())
		}
		if time.Since(start) > 30*time.Second {
			backoff = r.o.MinBackoff
		}
		wait := backoff/2 + time.Duration(rand.Int64N(int64(backoff/2)+1))
		r.o.Log.Debug("job stream ended, reconnecting", "err", err, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(time.Duration(float64(backoff)*1.7), r.o.MaxBackoff)
	}
}

// loop is the state the stream sessions share: it lives on Run's
// goroutine only.
type loop struct {
	queue    chan mgmtclient.Job       // to the worker
	results  chan mgmtclient.JobResult // from the worker
	inflight map[string]bool           // IDs queued or running
	unsent   []mgmtclient.JobResult    // results a broken stream did not take
}

// session runs one stream until it ends.
func (r *Runner) session(ctx context.Context, l *loop) error {
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	st, err := r.o.Open(sctx)
	if err != nil {
		return err
	}
	jobs := make(chan mgmtclient.Job)
	recvErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			j, err := st.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case jobs <- j:
			case <-sctx.Done():
				return
			}
		}
	}()
	for len(l.unsent) > 0 {
		if err := st.Send(l.unsent[0]); err != nil {
			return err
		}
		l.unsent = l.unsent[1:]
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-recvErr:
			return err
		case j := <-jobs:
			if res, answer := r.admit(l, j); answer {
				if err := st.Send(res); err != nil {
					return err
				}
			}
		case res := <-l.results:
			delete(l.inflight, string(res.ID))
			if err := st.Send(res); err != nil {
				l.unsent = append(l.unsent, res)
				return err
			}
		}
	}
}

// admit queues j, or returns the answer to send at once.
func (r *Runner) admit(l *loop, j mgmtclient.Job) (mgmtclient.JobResult, bool) {
	switch {
	case len(j.ID) == 0:
		r.o.Log.Warn("job without an ID ignored")
		return mgmtclient.JobResult{}, false
	case l.inflight[string(j.ID)]:
		r.o.Log.Info("job already queued or running", "job", jobRef(j.ID))
		return mgmtclient.JobResult{}, false
	case j.Bundle == nil:
		return mgmtclient.JobResult{ID: j.ID, Err: ReasonUnsupported}, true
	}
	select {
	case l.queue <- j:
		l.inflight[string(j.ID)] = true
		r.o.Log.Info("debug bundle job queued", "job", jobRef(j.ID))
		return mgmtclient.JobResult{}, false
	default:
		r.o.Log.Warn("debug bundle job refused: busy", "job", jobRef(j.ID))
		return mgmtclient.JobResult{ID: j.ID, Err: ReasonBusy}, true
	}
}

// work runs queued jobs one at a time.
func (r *Runner) work(ctx context.Context, queue <-chan mgmtclient.Job, results chan<- mgmtclient.JobResult) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-queue:
			res := r.run(ctx, j)
			select {
			case results <- res:
			case <-ctx.Done():
				return
			}
		}
	}
}

// run builds and uploads one bundle.
func (r *Runner) run(ctx context.Context, j mgmtclient.Job) mgmtclient.JobResult {
	log := r.o.Log.With("job", jobRef(j.ID))
	o, err := BundleOptions(j.Bundle)
	if err != nil {
		log.Warn("debug bundle job refused", "err", err)
		return mgmtclient.JobResult{ID: j.ID, Err: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, o.CollectFor+r.o.JobTimeout)
	defer cancel()
	log.Info("building a debug bundle", "collect_for", o.CollectFor, "log_files", o.LogFileCount, "anonymize", o.Anonymize)
	var buf bytes.Buffer
	res, err := r.o.Build(ctx, o, &buf)
	if err != nil {
		log.Warn("debug bundle failed", "err", err)
		return mgmtclient.JobResult{ID: j.ID, Err: fmt.Sprintf("build the debug bundle: %v", err)}
	}
	key, err := r.o.Uploader.Upload(ctx, j.ID, buf.Bytes())
	if err != nil {
		log.Warn("debug bundle upload failed", "err", err)
		return mgmtclient.JobResult{ID: j.ID, Err: err.Error()}
	}
	log.Info("debug bundle uploaded", "bytes", buf.Len(), "files", len(res.Files), "truncated", res.Truncated, "upload_key", key)
	return mgmtclient.JobResult{ID: j.ID, UploadKey: key}
}

// jobRef names a job in logs. The ID is the job's upload token, a
// secret: logs get a short hash of it.
func jobRef(id []byte) string {
	h := sha256.Sum256(id)
	return hex.EncodeToString(h[:4])
}

// ErrBadParams is a bundle job whose parameters are out of range.
var ErrBadParams = errors.New("invalid debug bundle parameters")

// BundleOptions turns a job's parameters into bundle options: a timed
// collection of 1 to 5 minutes, 0 to MaxLogFiles log files (0 means 1),
// anonymize_level "" or "default", else strict.
func BundleOptions(p *mgmtclient.BundleParams) (debugbundle.Options, error) {
	// Any level but the default is strict, so that an unknown one never
	// yields less anonymizing than asked for.
	strict := p.Anonymize && p.AnonymizeLevel != "" && !strings.EqualFold(p.AnonymizeLevel, "default")
	o := debugbundle.Options{Anonymize: p.Anonymize, Strict: strict, LogFileCount: int(p.LogFileCount)}
	if p.For {
		if p.ForMinutes < 1 || p.ForMinutes > int64(debugbundle.MaxCollectFor/time.Minute) {
			return o, fmt.Errorf("%w: bundle_for_time %d is not within 1..%d minutes", ErrBadParams, p.ForMinutes, debugbundle.MaxCollectFor/time.Minute)
		}
		o.CollectFor = time.Duration(p.ForMinutes) * time.Minute
	}
	if p.LogFileCount < 0 || p.LogFileCount > debugbundle.MaxLogFiles {
		return o, fmt.Errorf("%w: log_file_count %d is not within 0..%d", ErrBadParams, p.LogFileCount, debugbundle.MaxLogFiles)
	}
	return o, nil
}

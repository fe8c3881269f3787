// Package jobs runs remote debug-bundle jobs: an admin asks for a peer's
// bundle (REST), the job is handed to the peer's agent on its Job stream
// with a single-use upload token, the agent uploads the bundle to this
// server with that token and reports the outcome. It keeps the jobs and
// bundles in the store, so any management instance sharing it serves them,
// bounds how many are pending and stored, fails jobs that are never taken
// up or answered, and deletes bundles after Retention.
//
// It does not speak gRPC or HTTP: grpcapi and httpapi translate.
package jobs

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// Limits and lifetimes (the Options fields' defaults).
const (
	// MaxBundle is the largest bundle accepted for upload.
	MaxBundle = 50 << 20
	// DefaultMaxPendingPerPeer bounds a peer's pending jobs.
	DefaultMaxPendingPerPeer = 5
	// DefaultMaxBundlesPerAccount bounds an account's stored bundles
	// (pending jobs count: each may bring one).
	DefaultMaxBundlesPerAccount = 50
	// DefaultDeliveryTimeout fails a job whose peer does not open its Job
	// stream within it.
	DefaultDeliveryTimeout = 10 * time.Minute
	// DefaultUploadWindow is how long after delivery the token uploads
	// the bundle and the peer may answer; then the job fails.
	DefaultUploadWindow = 15 * time.Minute
	// DefaultRetention is how long bundles are kept.
	DefaultRetention = 7 * 24 * time.Hour
	// DefaultPoll is how often undelivered jobs are looked for, so that a
	// job created on another instance reaches a peer connected here.
	DefaultPoll = 2 * time.Second
	// DefaultSweep is how often stale jobs and old bundles are looked for.
	DefaultSweep = 30 * time.Second
	// TokenSize is the size of an upload token (JobRequest.ID).
	TokenSize = 32
)

// Options configure the service; zero limits take the defaults above.
type Options struct {
	Store                                   *store.Store
	Log                                     *slog.Logger
	Now                                     func() time.Time
	MaxPendingPerPeer, MaxBundlesPerAccount int
	DeliveryTimeout, UploadWindow           time.Duration
	Retention, Poll, Sweep                  time.Duration
}

// Service creates, delivers and completes jobs. Streams attached here are
// the Job streams open on this instance.
type Service struct {
	o Options

	mu      sync.Mutex
	streams map[account.PeerID]map[chan struct{}]struct{}
	// uploading holds the jobs whose bundle is being read here: a second
	// upload with the same token is refused before its body is read, so
	// one token cannot make this instance hold many bundles at once.
	uploading map[account.JobID]bool
}

// New returns a Service; call Run to deliver jobs created elsewhere and
// expire stale ones.
func New(o Options) *Service {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.DeliveryTimeout, DefaultDeliveryTimeout)
	def(&o.UploadWindow, DefaultUploadWindow)
	def(&o.Retention, DefaultRetention)
	def(&o.Poll, DefaultPoll)
	def(&o.Sweep, DefaultSweep)
	if o.MaxPendingPerPeer <= 0 {
		o.MaxPendingPerPeer = DefaultMaxPendingPerPeer
	}
	if o.MaxBundlesPerAccount <= 0 {
		o.MaxBundlesPerAccount = DefaultMaxBundlesPerAccount
	}
	return &Service{o: o, streams: map[account.PeerID]map[chan struct{}]struct{}{}}
}

// Validate checks bundle parameters as the API bounds them.
func Validate(p account.BundleParams) error {
	if p.BundleFor && (p.BundleForTime < 1 || p.BundleForTime > 5) {
		return fmt.Errorf("%w: workload.parameters.bundle_for_time must be between 1 and 5 (minutes) when bundle_for is true, got %d", ErrInvalid, p.BundleForTime)
	}
	if p.LogFileCount < 1 || p.LogFileCount > 1000 {
		return fmt.Errorf("%w: workload.parameters.log_file_count must be between 1 and 1000, got %d", ErrInvalid, p.LogFileCount)
	}
	return nil
}

// Create adds a pending job for one of the caller's account's peers and
// hands it over at once if the peer's Job stream is open here. The peer's
// agent must have announced that it uploads bundles to this server.
func (s *Service) Create(ctx context.Context, caller account.User, peer account.PeerID, p account.BundleParams) (account.Job, error) {
	if err := Validate(p); err != nil {
		return account.Job{}, err
	}
	now := s.o.Now()
	j := account.Job{ID: account.JobID(uuid.NewString()), AccountID: caller.AccountID, PeerID: peer, TriggeredBy: caller.ID, Params: p,
		Status: account.JobPending, CreatedAt: now}
	err := s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		a := tx.In(caller.AccountID)
		if _, err := a.Lock(ctx); err != nil { // serializes the caps below
			return err
		}
		pr, err := a.Peer(ctx, peer)
		if err != nil {
			return err
		}
		ok, err := a.JobSupport(ctx, peer)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: peer %q has not announced a wiremesh agent that uploads debug bundles to this server "+
				"(official NetBird clients send them to NetBird's cloud, upload.debug.netbird.io); connect it with the wiremesh agent", ErrUnsupported, pr.Name)
		}
		pending, held, err := a.JobLoad(ctx, peer)
		if err != nil {
			return err
		}
		if pending >= s.o.MaxPendingPerPeer {
			return fmt.Errorf("%w: peer %q has %d pending jobs (at most %d); wait for them to finish", ErrTooManyPending, pr.Name, pending, s.o.MaxPendingPerPeer)
		}
		if held >= s.o.MaxBundlesPerAccount {
			return fmt.Errorf("%w: the account holds %d debug bundles and pending jobs (at most %d); bundles are deleted %s after upload",
				ErrAccountFull, held, s.o.MaxBundlesPerAccount, s.o.Retention)
		}
		if err := a.InsertJob(ctx, j); err != nil {
			return err
		}
		_, err = a.InsertEvent(ctx, account.Event{At: now, Activity: "peer.job.create", Initiator: string(caller.ID), Target: string(peer),
			Meta: map[string]string{"job_id": string(j.ID), "type": "bundle", "name": pr.Name}})
		return err
	})
	if err != nil {
		return account.Job{}, fmt.Errorf("create job: %w", err)
	}
	s.wake(peer)
	return j, nil
}

// List lists a peer's jobs, newest first (the peer must be the account's).
func (s *Service) List(ctx context.Context, acc account.ID, peer account.PeerID) ([]account.Job, error) {
	var out []account.Job
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		a := tx.In(acc)
		if _, err := a.Peer(ctx, peer); err != nil {
			return err
		}
		var err error
		out, err = a.Jobs(ctx, peer)
		return err
	})
	return out, err
}

// Get reads one job of a peer.
func (s *Service) Get(ctx context.Context, acc account.ID, peer account.PeerID, id account.JobID) (account.Job, error) {
	var j account.Job
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		j, err = tx.In(acc).Job(ctx, peer, id)
		return err
	})
	return j, err
}

// Bundle reads a job's bundle: store.ErrNotFound for an unknown job,
// ErrNoBundle when none is stored (not yet uploaded, or deleted).
func (s *Service) Bundle(ctx context.Context, acc account.ID, peer account.PeerID, id account.JobID) ([]byte, error) {
	var data []byte
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		a := tx.In(acc)
		if _, err := a.Job(ctx, peer, id); err != nil {
			return err
		}
		var err error
		data, err = a.JobBundle(ctx, peer, id)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: not uploaded yet, failed, or deleted %s after upload", ErrNoBundle, s.o.Retention)
		}
		return err
	})
	return data, err
}

// SetSupport records what the peer's agent announced on Sync. It reads
// first: a reconnect storm of unchanged peers writes nothing.
func (s *Service) SetSupport(ctx context.Context, acc account.ID, peer account.PeerID, upload bool) error {
	var cur bool
	if err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		cur, err = tx.In(acc).JobSupport(ctx, peer)
		return err
	}); err != nil {
		return err
	}
	if cur == upload { // a missing row reads false, as it should
		return nil
	}
	return s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		return tx.In(acc).SetJobSupport(ctx, peer, upload)
	})
}

// Attach registers a Job stream of peer open here: wake receives a value
// when the peer may have jobs to take. Call detach when the stream ends.
func (s *Service) Attach(peer account.PeerID) (wake <-chan struct{}, detach func()) {
	ch := make(chan struct{}, 1)
	ch <- struct{}{} // look once at the start
	s.mu.Lock()
	if s.streams[peer] == nil {
		s.streams[peer] = map[chan struct{}]struct{}{}
	}
	s.streams[peer][ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.streams[peer], ch)
		if len(s.streams[peer]) == 0 {
			delete(s.streams, peer)
		}
	}
}

func (s *Service) wake(peer account.PeerID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.streams[peer] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (s *Service) attached(peer account.PeerID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams[peer]) > 0
}

// Delivery is a job being handed to its peer with its upload token.
type Delivery struct {
	Job   account.Job
	Token []byte // TokenSize random bytes: JobRequest.ID
}

func hashToken(t []byte) string {
	sum := sha256.Sum256(t)
	return hex.EncodeToString(sum[:])
}

// Claim takes the peer's undelivered jobs for sending, each with a fresh
// upload token. A job claimed by another instance is skipped. If sending
// fails, Unclaim the job.
func (s *Service) Claim(ctx context.Context, acc account.ID, peer account.PeerID) ([]Delivery, error) {
	var todo []account.Job
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		todo, err = tx.In(acc).UndeliveredJobs(ctx, peer)
		return err
	})
	if err != nil || len(todo) == 0 {
		return nil, err
	}
	var out []Delivery
	for _, j := range todo {
		tok := make([]byte, TokenSize)
		if _, err := rand.Read(tok); err != nil {
			return out, err
		}
		now := s.o.Now()
		var ok bool
		err := s.o.Store.Tx(ctx, func(tx *store.Tx) error {
			var err error
			ok, err = tx.In(acc).ClaimJob(ctx, j.ID, hashToken(tok), now.UnixNano())
			return err
		})
		if err != nil {
			return out, fmt.Errorf("claim job %s: %w", j.ID, err)
		}
		if ok {
			j.DeliveredAt = now
			out = append(out, Delivery{Job: j, Token: tok})
		}
	}
	return out, nil
}

// Unclaim puts back a job that could not be sent.
func (s *Service) Unclaim(ctx context.Context, d Delivery) error {
	return s.o.Store.Tx(ctx, func(tx *store.Tx) error { return tx.In(d.Job.AccountID).UnclaimJob(ctx, d.Job.ID, hashToken(d.Token)) })
}

// Result is a peer's answer to a job.
type Result struct {
	Token     []byte // JobResponse.ID
	Succeeded bool
	Reason    string // why it failed
	UploadKey string // what the upload answered, on success
}

// Finish records the peer's answer. Success counts only if the bundle
// was uploaded here under the key the peer reports.
func (s *Service) Finish(ctx context.Context, acc account.ID, peer account.PeerID, r Result) (account.Job, error) {
	var j account.Job
	err := s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		var err error
		j, err = tx.In(acc).FinishJob(ctx, peer, hashToken(r.Token), func(cur account.Job) (account.JobStatus, string) {
			switch {
			case !r.Succeeded:
				reason := r.Reason
				if reason == "" {
					reason = "the agent reported a failure without a reason"
				}
				return account.JobFailed, reason
			case cur.UploadKey == "":
				return account.JobFailed, "the agent reported success but uploaded no bundle to this server"
			case cur.UploadKey != r.UploadKey:
				return account.JobFailed, "the agent reported an upload key this server did not issue for the job"
			}
			return account.JobSucceeded, ""
		}, s.o.Now().UnixNano())
		return err
	})
	if err != nil {
		return j, fmt.Errorf("finish job: %w", err)
	}
	return j, nil
}

// EncodeToken is how the agent presents a token on upload: base64 raw URL
// encoding (no padding) in Authorization: Bearer.
func EncodeToken(t []byte) string { return base64.RawURLEncoding.EncodeToString(t) }

// Check finds the pending job a presented upload token belongs to, before
// the body is read: ErrBadToken unless it is one this server handed out
// within UploadWindow and no bundle was uploaded with it yet.
func (s *Service) Check(ctx context.Context, presented string) (account.Job, error) {
	tok, err := base64.RawURLEncoding.DecodeString(presented)
	if err != nil || len(tok) != TokenSize {
		return account.Job{}, ErrBadToken
	}
	var j account.Job
	err = s.o.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		j, err = tx.JobByToken(ctx, hashToken(tok))
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return j, ErrBadToken
	case err != nil:
		return j, err
	case j.Status != account.JobPending || !j.UploadedAt.IsZero() || s.o.Now().Sub(j.DeliveredAt) >= s.o.UploadWindow:
		return j, ErrBadToken
	}
	return j, nil
}

// Upload stores body as the bundle of the job Check returned and answers
// its upload key. At most MaxBundle bytes are read (and held).
func (s *Service) Upload(ctx context.Context, j account.Job, presented string, body io.Reader) (string, error) {
	tok, err := base64.RawURLEncoding.DecodeString(presented)
	if err != nil || len(tok) != TokenSize {
		return "", ErrBadToken
	}
	s.mu.Lock()
	if s.uploading == nil {
		s.uploading = map[account.JobID]bool{}
	}
	busy := s.uploading[j.ID]
	s.uploading[j.ID] = true
	s.mu.Unlock()
	if busy {
		return "", fmt.Errorf("%w: an upload for this job is already in progress", ErrBadToken)
	}
	defer func() {
		s.mu.Lock()
		delete(s.uploading, j.ID)
		s.mu.Unlock()
	}()
	data, err := io.ReadAll(io.LimitReader(body, MaxBundle+1))
	if err != nil {
		return "", fmt.Errorf("read bundle: %w", err)
	}
	if len(data) > MaxBundle {
		return "", fmt.Errorf("%w: at most %d bytes", ErrTooLarge, MaxBundle)
	}
	if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		return "", fmt.Errorf("%w: the bundle is not gzip data", ErrInvalid)
	}
	k := make([]byte, 18)
	if _, err := rand.Read(k); err != nil {
		return "", err
	}
	key := "wm-" + base64.RawURLEncoding.EncodeToString(k)
	now := s.o.Now()
	var ok bool
	err = s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		var err error
		ok, err = tx.In(j.AccountID).StoreBundle(ctx, j.ID, hashToken(tok), data, key, now.Add(-s.o.UploadWindow).UnixNano(), now.UnixNano())
		return err
	})
	if err != nil {
		return "", fmt.Errorf("store bundle: %w", err)
	}
	if !ok {
		return "", ErrBadToken // used meanwhile, or expired
	}
	s.o.Log.InfoContext(ctx, "debug bundle uploaded", "job", j.ID, "peer", j.PeerID, "bytes", len(data))
	return key, nil
}

// Run wakes Job streams open here for jobs created on other instances,
// fails jobs never taken up or answered and deletes old bundles, until
// ctx ends.
func (s *Service) Run(ctx context.Context) {
	poll := time.NewTicker(s.o.Poll)
	defer poll.Stop()
	sweep := time.NewTicker(s.o.Sweep)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			s.pollUndelivered(ctx)
		case <-sweep.C:
			s.SweepOnce(ctx)
		}
	}
}

func (s *Service) pollUndelivered(ctx context.Context) {
	s.mu.Lock()
	n := len(s.streams)
	s.mu.Unlock()
	if n == 0 {
		return
	}
	var ps []account.Peer
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		ps, err = tx.PeersWithUndeliveredJobs(ctx)
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			s.o.Log.WarnContext(ctx, "look for undelivered jobs", "err", err)
		}
		return
	}
	for _, p := range ps {
		if s.attached(p.ID) {
			s.wake(p.ID)
		}
	}
}

// sweepBatch bounds the bundles one sweep deletes per statement.
const sweepBatch = 100

// SweepOnce fails stale jobs and deletes bundles older than Retention.
func (s *Service) SweepOnce(ctx context.Context) {
	now := s.o.Now()
	err := s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		_, err := tx.FailStaleJobs(ctx, now.Add(-s.o.DeliveryTimeout).UnixNano(), "peer did not connect within "+s.o.DeliveryTimeout.String(),
			now.Add(-s.o.UploadWindow).UnixNano(), "peer did not report a result within "+s.o.UploadWindow.String(), now.UnixNano())
		return err
	})
	if err != nil && ctx.Err() == nil {
		s.o.Log.WarnContext(ctx, "fail stale jobs", "err", err)
	}
	for range 10 {
		var n int64
		err := s.o.Store.Tx(ctx, func(tx *store.Tx) error {
			var err error
			n, err = tx.DeleteBundlesBefore(ctx, now.Add(-s.o.Retention).UnixNano(), sweepBatch)
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				s.o.Log.WarnContext(ctx, "delete old debug bundles", "err", err)
			}
			return
		}
		if n < sweepBatch {
			return
		}
	}
}

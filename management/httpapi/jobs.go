package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wiremesh/wiremesh/internal/clientip"
	"github.com/wiremesh/wiremesh/internal/ratelimit"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/jobs"
)

// UploadPath is where agents upload debug bundles (PUT, Authorization:
// Bearer <upload token>). It is the one route authenticated by neither a
// JWT nor a personal access token, and whose body may exceed MaxBody.
const UploadPath = "/api/debug-bundles/upload"

// uploadBodyTimeout is how long an authenticated upload may take to
// arrive (the server's default body deadline is shorter).
const uploadBodyTimeout = 10 * time.Minute

// jobRoutes registers the remote jobs (debug bundle) routes; without a
// jobs service (Options.Jobs nil) they answer 404.
func (a *API) jobRoutes(authed func(string, handler), open func(string, func(http.ResponseWriter, *http.Request) error)) {
	on := func(h handler) handler {
		return func(w http.ResponseWriter, r *http.Request, caller account.User) error {
			if a.o.Jobs == nil {
				return errNoRoute
			}
			return h(w, r, caller)
		}
	}
	authed("GET /api/peers/{peerId}/jobs", on(a.listJobs))
	authed("POST /api/peers/{peerId}/jobs", on(a.createJob))
	authed("GET /api/peers/{peerId}/jobs/{jobId}", on(a.getJob))
	authed("GET /api/peers/{peerId}/jobs/{jobId}/bundle", on(a.getBundle))
	open("PUT "+UploadPath, a.uploadBundle)
}

type bundleParamsJSON struct {
	BundleFor     *bool `json:"bundle_for"`
	BundleForTime *int  `json:"bundle_for_time"`
	LogFileCount  *int  `json:"log_file_count"`
	Anonymize     *bool `json:"anonymize"`
}

type bundleResultJSON struct {
	UploadKey *string `json:"upload_key"`
}

type workloadJSON struct {
	Type       string               `json:"type"`
	Parameters account.BundleParams `json:"parameters"`
	Result     bundleResultJSON     `json:"result"`
}

type jobJSON struct {
	ID           string       `json:"id"`
	CreatedAt    string       `json:"created_at"`
	CompletedAt  *string      `json:"completed_at"`
	TriggeredBy  string       `json:"triggered_by"`
	Status       string       `json:"status"`
	FailedReason *string      `json:"failed_reason"`
	Workload     workloadJSON `json:"workload"`
}

func toJob(j account.Job) jobJSON {
	out := jobJSON{ID: string(j.ID), CreatedAt: ts(j.CreatedAt), TriggeredBy: string(j.TriggeredBy), Status: string(j.Status),
		Workload: workloadJSON{Type: "bundle", Parameters: j.Params}}
	if !j.CompletedAt.IsZero() {
		c := ts(j.CompletedAt)
		out.CompletedAt = &c
	}
	if j.FailedReason != "" {
		r := j.FailedReason
		out.FailedReason = &r
	}
	if j.UploadKey != "" && j.Status == account.JobSucceeded {
		k := j.UploadKey
		out.Workload.Result.UploadKey = &k
	}
	return out
}

func (a *API) listJobs(w http.ResponseWriter, r *http.Request, caller account.User) error {
	js, err := a.o.Jobs.List(r.Context(), caller.AccountID, account.PeerID(r.PathValue("peerId")))
	if err != nil {
		return err
	}
	out := make([]jobJSON, 0, len(js))
	for _, j := range js {
		out = append(out, toJob(j))
	}
	return ok(w, out)
}

func (a *API) createJob(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var req struct {
		Workload *struct {
			Type       string            `json:"type"`
			Parameters *bundleParamsJSON `json:"parameters"`
		} `json:"workload"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	switch {
	case req.Workload == nil:
		return fmt.Errorf("%w: workload is required", jobs.ErrInvalid)
	case req.Workload.Type != "bundle":
		return fmt.Errorf("%w: workload.type must be \"bundle\", got %q", jobs.ErrInvalid, req.Workload.Type)
	case req.Workload.Parameters == nil:
		return fmt.Errorf("%w: workload.parameters is required", jobs.ErrInvalid)
	}
	q := req.Workload.Parameters
	for name, missing := range map[string]bool{"bundle_for": q.BundleFor == nil, "bundle_for_time": q.BundleForTime == nil,
		"log_file_count": q.LogFileCount == nil, "anonymize": q.Anonymize == nil} {
		if missing {
			return fmt.Errorf("%w: workload.parameters.%s is required", jobs.ErrInvalid, name)
		}
	}
	p := account.BundleParams{BundleFor: *q.BundleFor, BundleForTime: *q.BundleForTime, LogFileCount: *q.LogFileCount, Anonymize: *q.Anonymize}
	j, err := a.o.Jobs.Create(r.Context(), caller, account.PeerID(r.PathValue("peerId")), p)
	if err != nil {
		return err
	}
	// The reference answers 201 here, the only 201 of its API.
	writeJSON(w, http.StatusCreated, toJob(j))
	return nil
}

func (a *API) getJob(w http.ResponseWriter, r *http.Request, caller account.User) error {
	j, err := a.o.Jobs.Get(r.Context(), caller.AccountID, account.PeerID(r.PathValue("peerId")), account.JobID(r.PathValue("jobId")))
	if err != nil {
		return err
	}
	return ok(w, toJob(j))
}

// getBundle downloads a job's bundle (a wiremesh extension: the reference
// sends bundles to its cloud).
func (a *API) getBundle(w http.ResponseWriter, r *http.Request, caller account.User) error {
	peer, id := r.PathValue("peerId"), r.PathValue("jobId")
	data, err := a.o.Jobs.Bundle(r.Context(), caller.AccountID, account.PeerID(peer), account.JobID(id))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Header().Set("Content-Disposition", `attachment; filename="debug-bundle-`+safeName(peer)+"-"+safeName(id)+`.tar.gz"`)
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(data)
	}
	return nil
}

// safeName keeps an ID fit for a file name in a header.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, s)
}

// uploadBundle takes a bundle from an agent, authenticated by the job's
// single-use upload token alone. Wrong tokens are limited per source.
func (a *API) uploadBundle(w http.ResponseWriter, r *http.Request) error {
	if a.o.Jobs == nil {
		return errNoRoute
	}
	scheme, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || cred == "" {
		return fmt.Errorf("%w: send Authorization: Bearer <upload token of the job>", jobs.ErrBadToken)
	}
	src := clientip.Resolver{Trusted: a.o.TrustedProxies}.FromRequest(r)
	res, err := a.uploadGuard.Reserve(ratelimit.Key{Src: src, Subject: "debug-bundle-upload"})
	if err != nil {
		return fmt.Errorf("%w: too many wrong upload tokens from this address; wait a minute", errTooManyTokens)
	}
	cred = strings.TrimSpace(cred)
	j, err := a.o.Jobs.Check(r.Context(), cred)
	if err != nil {
		if errors.Is(err, jobs.ErrBadToken) {
			res.Fail()
		} else {
			res.Success()
		}
		return err
	}
	res.Success()
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/gzip") && !strings.HasPrefix(ct, "application/x-gzip") &&
		!strings.HasPrefix(ct, "application/octet-stream") {
		return fmt.Errorf("%w: Content-Type must be application/gzip, got %q", errUnsupportedMedia, ct)
	}
	if r.ContentLength > jobs.MaxBundle {
		return fmt.Errorf("%w: %d bytes announced, at most %d", jobs.ErrTooLarge, r.ContentLength, jobs.MaxBundle)
	}
	// Authenticated: the body may take longer than the default deadline.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(uploadBodyTimeout))
	key, err := a.o.Jobs.Upload(r.Context(), j, cred, r.Body)
	if err != nil {
		return err
	}
	return ok(w, bundleResultJSON{UploadKey: &key})
}

var (
	errTooManyTokens    = errors.New("too many wrong tokens")
	errUnsupportedMedia = errors.New("unsupported media type")
)

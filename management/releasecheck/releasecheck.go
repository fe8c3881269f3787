// Package releasecheck finds out the latest released versions of the
// management server and the dashboard from a feed whose URL the operator
// chose (--version-check-url). It is off unless configured, asks the feed
// only when a caller wants the answer and at most once per interval (6 h
// by default), and caches the answer; a failed fetch is cached as well,
// so a broken feed is not hammered. It does not download or apply updates,
// and it starts no goroutines.
//
// The feed answers GET with either JSON,
//
//	{"management": "0.78.0", "dashboard": "2.12.0"}
//
// where both fields are optional but one must be present (a GitHub
// "latest release" answer, {"tag_name": "v0.78.0", ...}, counts as the
// management version), or plain text holding just the management version
// ("0.78.0" or "v0.78.0"). Versions are semantic versions.
package releasecheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults of Options.
const (
	DefaultInterval = 6 * time.Hour
	DefaultTimeout  = 10 * time.Second
	DefaultMaxBytes = 256 << 10 // a GitHub release answer with notes fits
)

// Latest holds the latest released versions the feed names, in canonical
// form; "" when the feed does not name one.
type Latest struct {
	Management string
	Dashboard  string
}

// Options configure a Checker.
type Options struct {
	// URL of the feed, http or https; "" turns the check off.
	URL string
	// Client makes the request (default: http.DefaultClient's transport).
	Client *http.Client
	// Interval is the least time between two fetches (default 6 h).
	Interval time.Duration
	// Timeout bounds one fetch, body included (default 10 s).
	Timeout time.Duration
	// MaxBytes caps the answer's size (default 256 KiB).
	MaxBytes int64
	// UserAgent is sent with the request.
	UserAgent string
	Log       *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Checker answers with the cached result of the last fetch, fetching again
// once it is older than the interval. Safe for concurrent use.
type Checker struct {
	o Options
	// turn is held by the one caller fetching or reading the cache; the
	// fields below are guarded by it.
	turn    chan struct{}
	fetched time.Time // end of the last fetch; zero: never
	latest  Latest
	err     error
}

// New checks the options. With no URL it returns nil and no error: the
// check is off, and a nil *Checker answers ErrOff.
func New(o Options) (*Checker, error) {
	if o.URL == "" {
		return nil, nil
	}
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q: want an absolute http(s) URL", o.URL)
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Checker{o: o, turn: make(chan struct{}, 1)}, nil
}

// Latest returns the latest released versions, fetching them first when
// the cached answer is older than the interval. It returns the error of
// the last fetch while that is cached, ErrOff on a nil Checker, and ctx's
// error when ctx ends while another caller's fetch is under way. A fetch
// outlives the cancellation of the ctx that started it (bounded by the
// timeout), so a caller going away does not cache a failure.
func (c *Checker) Latest(ctx context.Context) (Latest, error) {
	if c == nil {
		return Latest{}, ErrOff
	}
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return Latest{}, ctx.Err()
	}
	defer func() { <-c.turn }()
	if c.fetched.IsZero() || c.o.Now().Sub(c.fetched) >= c.o.Interval {
		c.latest, c.err = c.fetch(context.WithoutCancel(ctx))
		c.fetched = c.o.Now()
		if c.err != nil {
			c.o.Log.Warn("release check failed; versions unknown until the next check", "url", c.o.URL, "err", c.err, "next", c.o.Interval)
		}
	}
	return c.latest, c.err
}

func (c *Checker) fetch(ctx context.Context) (Latest, error) {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.o.URL, nil)
	if err != nil {
		return Latest{}, fmt.Errorf("release feed request: %w", err)
	}
	req.Header.Set("Accept", "application/json, text/plain")
	if c.o.UserAgent != "" {
		req.Header.Set("User-Agent", c.o.UserAgent)
	}
	resp, err := c.o.Client.Do(req)
	if err != nil {
		return Latest{}, fmt.Errorf("release feed: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Latest{}, fmt.Errorf("release feed: status %d: %w", resp.StatusCode, ErrMalformed)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.o.MaxBytes+1))
	if err != nil {
		return Latest{}, fmt.Errorf("release feed: read: %w", err)
	}
	if int64(len(body)) > c.o.MaxBytes {
		return Latest{}, fmt.Errorf("release feed: more than %d bytes: %w", c.o.MaxBytes, ErrTooLarge)
	}
	return Parse(body)
}

// Parse reads a feed answer (see the package comment).
func Parse(body []byte) (Latest, error) {
	body = bytes.TrimSpace(body)
	if bytes.HasPrefix(body, []byte("{")) {
		var f struct {
			Management string `json:"management"`
			Dashboard  string `json:"dashboard"`
			TagName    string `json:"tag_name"`
		}
		if err := json.Unmarshal(body, &f); err != nil {
			return Latest{}, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		if f.Management == "" {
			f.Management = f.TagName
		}
		if f.Management == "" && f.Dashboard == "" {
			return Latest{}, fmt.Errorf("%w: neither management nor dashboard is given", ErrMalformed)
		}
		var l Latest
		for _, v := range []struct {
			name string
			in   string
			out  *string
		}{{"management", f.Management, &l.Management}, {"dashboard", f.Dashboard, &l.Dashboard}} {
			if v.in == "" {
				continue
			}
			p, err := ParseVersion(v.in)
			if err != nil {
				return Latest{}, fmt.Errorf("%w: %s: %w", ErrMalformed, v.name, err)
			}
			*v.out = p.String()
		}
		return l, nil
	}
	text := string(body)
	if text == "" || strings.ContainsAny(text, " \t\r\n") {
		return Latest{}, fmt.Errorf("%w: want JSON or a single version", ErrMalformed)
	}
	p, err := ParseVersion(text)
	if err != nil {
		return Latest{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return Latest{Management: p.String()}, nil
}

// Newer reports whether latest is a newer version than current; ok is
// false when either is not a semantic version (a development build, say),
// so nothing can be said.
func Newer(current, latest string) (newer, ok bool) {
	c, err := ParseVersion(current)
	if err != nil {
		return false, false
	}
	l, err := ParseVersion(latest)
	if err != nil {
		return false, false
	}
	return l.Compare(c) > 0, true
}

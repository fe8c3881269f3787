// Package sshaudit records access to the agents' SSH servers in the
// activity log: sessions started and ended, and attempts refused, as our
// agents report them (a wiremesh extension, docs/extensions.md), and
// servers whose host key was not the map's, as the client's agent
// reports them. Reports come from any peer, so they are hostile input:
// every field is checked (Check), each reporter is limited in events per
// second, and an event is written only when its source (for a host key
// mismatch, the peer dialed) is a peer of the reporter's own account.
// It does not decide who may log in (the agents do) nor read anything
// from the agents itself.
package sshaudit

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/wiremesh/wiremesh/internal/unixuser"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// Activity codes of the events written (account.Activities lists them).
const (
	CodeStart   = "peer.ssh.session.start"
	CodeEnd     = "peer.ssh.session.end"
	CodeRefused = "peer.ssh.session.refused"
	CodeDropped = "peer.ssh.events.dropped"
	// CodeHostKeyMismatch: the reporter's `netbird ssh` refused a server
	// presenting a host key other than the map's (a forged or stale key).
	CodeHostKeyMismatch = "peer.ssh.hostkey.mismatch"
)

// Type is what happened.
type Type uint8

// Types of events.
const (
	Start Type = iota + 1
	End
	Refused
	// HostKeyMismatch is reported by the client's side: the reporter is
	// the source, Target the peer it dialed.
	HostKeyMismatch
)

// Kind is what a session ran.
type Kind uint8

// Kinds of sessions; KindNone for a refusal before any channel.
const (
	KindNone Kind = iota
	Shell
	Exec
	SFTP
	LocalForward
	RemoteForward
)

var kindNames = [...]string{"", "shell", "exec", "sftp", "local_forward", "remote_forward"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one report of the reporting peer's SSH server, the target.
type Event struct {
	Type     Type
	Source   netip.Addr // the overlay address the client came from
	User     string     // the Unix user (asked for, when refused)
	Kind     Kind
	Reason   string // Refused only
	At       time.Time
	Duration time.Duration // End only
	Session  uint64        // pairs an End with its Start
	PTY      bool
	Forward  string // host:port of a forward
	// JWTUser is the user whose token the client logged in with, as the
	// target says (empty for a key login). Recorded only if it names a
	// user of the target's account.
	JWTUser string
	// HostKeyMismatch only (Source is then unset): the overlay address
	// and port dialed, and the SHA256 fingerprints of the host key
	// presented and of the one the reporter's map gives.
	Target              netip.Addr
	Port                uint16
	Presented, Expected string
}

// Limits of a report.
const (
	MaxBatch    = 64
	MaxUser     = unixuser.MaxLen
	MaxReason   = 256
	MaxForward  = 262 // a 255-byte host name, ':' and a port
	MaxJWTUser  = 256
	MaxAge      = 7 * 24 * time.Hour
	MaxSkew     = 5 * time.Minute
	MaxDuration = 366 * 24 * time.Hour
)

// ErrInvalid is a report with a field out of bounds; nothing of it is
// written.
var ErrInvalid = errors.New("invalid SSH event report")

// ErrRateLimited refuses a report past the reporter's events per second;
// nothing of it is written, the agent sends it again later.
var ErrRateLimited = errors.New("too many SSH events from this peer")

// CheckBatch checks every event of a report at now; the error names the
// first bad one and its field.
func CheckBatch(evs []Event, now time.Time) error {
	if len(evs) > MaxBatch {
		return fmt.Errorf("%w: %d events, at most %d per report", ErrInvalid, len(evs), MaxBatch)
	}
	for i, e := range evs {
		if err := Check(e, now); err != nil {
			return fmt.Errorf("events[%d]: %w", i, err)
		}
	}
	return nil
}

// Check checks one event at now.
func Check(e Event, now time.Time) error {
	bad := func(field, why string) error { return fmt.Errorf("%w: %s %s", ErrInvalid, field, why) }
	switch e.Type {
	case Start, End, Refused:
		if e.Target.IsValid() || e.Port != 0 || e.Presented != "" || e.Expected != "" {
			return bad("target_ip", "and the port and fingerprints are only for a host key mismatch")
		}
		if !e.Source.IsValid() || e.Source.Zone() != "" {
			return bad("source_ip", "is not an IP address")
		}
	case HostKeyMismatch:
		if err := checkMismatch(e); err != nil {
			return err
		}
	default:
		return bad("type", "unknown")
	}
	if !unixuser.Valid(e.User) {
		return bad("unix_user", fmt.Sprintf("must be at most %d letters, digits, '.', '_', '-', '@' (a trailing '$' allowed), not starting with '-'", MaxUser))
	}
	if e.Kind > RemoteForward || (e.Kind == KindNone && e.Type != Refused && e.Type != HostKeyMismatch) {
		return bad("kind", "unknown")
	}
	if e.Type == Refused {
		if e.Reason == "" {
			return bad("reason", "is required for a refusal")
		}
	} else if e.Reason != "" {
		return bad("reason", "is only for a refusal")
	}
	if len(e.Reason) > MaxReason || !printable(e.Reason) {
		return bad("reason", fmt.Sprintf("must be at most %d bytes of printable UTF-8", MaxReason))
	}
	if e.At.IsZero() || e.At.Before(now.Add(-MaxAge)) || e.At.After(now.Add(MaxSkew)) {
		return bad("at", fmt.Sprintf("must be within %v before and %v after the server's clock", MaxAge, MaxSkew))
	}
	if e.Duration < 0 || e.Duration > MaxDuration || (e.Duration != 0 && e.Type != End) {
		return bad("duration", fmt.Sprintf("must be 0..%v, and only on a session end", MaxDuration))
	}
	isFwd := e.Kind == LocalForward || e.Kind == RemoteForward
	if e.Forward != "" && !isFwd {
		return bad("forward", "is only for a forward")
	}
	if len(e.Forward) > MaxForward || !printable(e.Forward) || strings.ContainsRune(e.Forward, ' ') {
		return bad("forward", fmt.Sprintf("must be a host:port of at most %d bytes", MaxForward))
	}
	if len(e.JWTUser) > MaxJWTUser || !printable(e.JWTUser) || strings.ContainsRune(e.JWTUser, ' ') {
		return bad("jwt_user", fmt.Sprintf("must be at most %d bytes of printable UTF-8 without spaces", MaxJWTUser))
	}
	return nil
}

// checkMismatch checks what only a host key mismatch has: the reporter is
// the source (no source_ip), a target, a port, two different
// fingerprints, and nothing of a session.
func checkMismatch(e Event) error {
	bad := func(field, why string) error { return fmt.Errorf("%w: %s %s", ErrInvalid, field, why) }
	switch {
	case e.Source.IsValid():
		return bad("source_ip", "must be empty for a host key mismatch: the reporter is the source")
	case !e.Target.IsValid() || e.Target.Zone() != "":
		return bad("target_ip", "is not an IP address")
	case e.Port == 0:
		return bad("target_port", "must be 1..65535")
	case !validFingerprint(e.Presented):
		return bad("presented_key_fingerprint", "must be an OpenSSH SHA256 fingerprint (SHA256: and 43 base64 characters)")
	case !validFingerprint(e.Expected):
		return bad("expected_key_fingerprint", "must be an OpenSSH SHA256 fingerprint (SHA256: and 43 base64 characters)")
	case e.Presented == e.Expected:
		return bad("presented_key_fingerprint", "is the expected one: that is no mismatch")
	case e.Kind != KindNone || e.Session != 0 || e.PTY || e.Forward != "" || e.JWTUser != "" || e.Duration != 0:
		return bad("kind", "and the session fields are not for a host key mismatch")
	}
	return nil
}

// validFingerprint: ssh.FingerprintSHA256's form, SHA256: and the
// digest in unpadded standard base64.
func validFingerprint(f string) bool {
	b64, ok := strings.CutPrefix(f, "SHA256:")
	if !ok || len(b64) != 43 {
		return false
	}
	for _, r := range b64 {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '+' || r == '/') {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// Options wire a Recorder.
type Options struct {
	Store *store.Store
	// Written learns that an account's activity log grew (the live
	// event stream); nil: nobody.
	Written func(account.ID)
	// Burst and Every bound each reporter's events: Burst at once, then
	// one per Every (0: 120 and 1 s).
	Burst int
	Every time.Duration
	Now   func() time.Time
}

// Recorder writes reports to the activity log. Safe for concurrent use.
type Recorder struct {
	o      Options
	limits *limiter
}

// New returns a Recorder.
func New(o Options) *Recorder {
	if o.Burst <= 0 {
		o.Burst = 120
	}
	if o.Every <= 0 {
		o.Every = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Recorder{o: o, limits: newLimiter(o.Burst, o.Every, maxReporters, o.Now)}
}

// maxReporters bounds the reporters whose limits are remembered.
const maxReporters = 100_000

// Admit spends the reporter's allowance for a report of n events (at
// least one: an empty report costs too), before the report is checked or
// written. The reporter must be a registered peer (the caller looked it
// up): a key nobody registered must get no bucket, or anyone could fill
// the table with fresh keys and lock real reporters out.
func (r *Recorder) Admit(reporter account.PeerID, n int) error {
	if !r.limits.take(string(reporter), max(n, 1)) {
		return ErrRateLimited
	}
	return nil
}

// Reporters is how many reporters' allowances are remembered.
func (r *Recorder) Reporters() int {
	r.limits.mu.Lock()
	defer r.limits.mu.Unlock()
	return len(r.limits.buckets)
}

// Record writes the events reported by target (the peer whose SSH server
// it is; for a HostKeyMismatch the client, whose Target is the peer it
// dialed), and a note of dropped events if the agent lost some, in one
// transaction: all or nothing. Events whose source (for a mismatch: its
// target) is not another peer of target's account are left out (a peer
// deleted since, or a stranger on the overlay); a JWTUser that is no
// user of the account is not recorded as one (the event says so). It returns how many were written.
// Check the batch (CheckBatch) and Admit it first.
func (r *Recorder) Record(ctx context.Context, target account.Peer, evs []Event, dropped uint64) (int, error) {
	written := 0
	err := r.o.Store.Tx(ctx, func(tx *store.Tx) error {
		written = 0
		at := tx.In(target.AccountID)
		sources := map[netip.Addr]*account.Peer{}
		users := map[string]bool{}
		for _, e := range evs {
			if e.Type == HostKeyMismatch {
				// Looked up as sources are: by overlay address, in the
				// reporter's account only.
				dialed, ok := sources[e.Target]
				if !ok {
					p, err := at.PeerByIP(ctx, e.Target)
					switch {
					case errors.Is(err, store.ErrNotFound):
					case err != nil:
						return fmt.Errorf("target peer %s: %w", e.Target, err)
					default:
						dialed = &p
					}
					sources[e.Target] = dialed
				}
				if dialed == nil || dialed.ID == target.ID {
					continue
				}
				if _, err := at.InsertEvent(ctx, mismatchActivity(target, *dialed, e)); err != nil {
					return fmt.Errorf("recording an SSH host key mismatch: %w", err)
				}
				written++
				continue
			}
			src, ok := sources[e.Source]
			if !ok {
				p, err := at.PeerByIP(ctx, e.Source)
				switch {
				case errors.Is(err, store.ErrNotFound):
				case err != nil:
					return fmt.Errorf("source peer %s: %w", e.Source, err)
				default:
					src = &p
				}
				sources[e.Source] = src
			}
			if src == nil || src.ID == target.ID {
				continue
			}
			known, ok := users[e.JWTUser]
			if !ok && e.JWTUser != "" {
				_, err := at.User(ctx, account.UserID(e.JWTUser))
				switch {
				case errors.Is(err, store.ErrNotFound):
				case err != nil:
					return fmt.Errorf("token user %q: %w", e.JWTUser, err)
				default:
					known = true
				}
				users[e.JWTUser] = known
			}
			if _, err := at.InsertEvent(ctx, activity(target, *src, e, known)); err != nil {
				return fmt.Errorf("recording an SSH event: %w", err)
			}
			written++
		}
		if dropped > 0 {
			if _, err := at.InsertEvent(ctx, account.Event{At: r.o.Now(), Activity: CodeDropped, Initiator: string(target.ID), Target: string(target.ID),
				Meta: map[string]string{"name": target.Name, "ip": target.IP.String(), "dropped": strconv.FormatUint(dropped, 10)}}); err != nil {
				return fmt.Errorf("recording dropped SSH events: %w", err)
			}
			written++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if written > 0 && r.o.Written != nil {
		r.o.Written(target.AccountID)
	}
	return written, nil
}

// activity is the activity-log entry of e, about the target and reported
// by it alone (meta reported_by): initiated by the user whose token the
// client logged in with if the target names one (jwtKnown: a user of the
// account), else by the source peer. Never by the source peer's owner:
// the target cannot vouch for who sat at the source peer.
func activity(target, src account.Peer, e Event, jwtKnown bool) account.Event {
	initiator := string(src.ID)
	meta := map[string]string{
		"reported_by": string(target.ID),
		"name":        target.Name, "ip": target.IP.String(),
		"source_peer_id": string(src.ID), "source_name": src.Name, "source_ip": e.Source.String(),
		"unix_user": e.User,
	}
	if e.Kind != KindNone {
		meta["kind"] = e.Kind.String()
	}
	if e.Session != 0 {
		meta["session"] = strconv.FormatUint(e.Session, 10)
	}
	if e.PTY {
		meta["pty"] = "true"
	}
	if e.Forward != "" {
		meta["forward"] = e.Forward
	}
	switch {
	case e.JWTUser != "" && jwtKnown:
		initiator = e.JWTUser
		meta["jwt_user"] = e.JWTUser
	case e.JWTUser != "":
		// Hostile or stale (a user deleted since): not taken as who did it.
		meta["jwt_user_refused"] = "the reported token user is no user of this account"
	}
	code := CodeStart
	switch e.Type {
	case End:
		code = CodeEnd
		meta["duration_ms"] = strconv.FormatInt(e.Duration.Milliseconds(), 10)
	case Refused:
		code = CodeRefused
		meta["reason"] = e.Reason
	}
	return account.Event{At: e.At.UTC(), Activity: code, Initiator: initiator, Target: string(target.ID), Meta: meta}
}

// mismatchActivity is the activity-log entry of a host key mismatch the
// reporter's client saw dialing the peer dialed: initiated by the
// reporter (the peer whose client refused the server), about the peer
// dialed, reported_by the reporter. It says a server at that address
// showed another key, not who forged it: the reporter vouches only for
// what its client saw.
func mismatchActivity(reporter, dialed account.Peer, e Event) account.Event {
	meta := map[string]string{
		"reported_by": string(reporter.ID),
		"name":        dialed.Name, "ip": e.Target.String(), "port": strconv.Itoa(int(e.Port)),
		"source_peer_id": string(reporter.ID), "source_name": reporter.Name, "source_ip": reporter.IP.String(),
		"unix_user":                 e.User,
		"presented_key_fingerprint": e.Presented,
		"expected_key_fingerprint":  e.Expected,
	}
	return account.Event{At: e.At.UTC(), Activity: CodeHostKeyMismatch, Initiator: string(reporter.ID), Target: string(dialed.ID), Meta: meta}
}

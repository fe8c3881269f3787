package oidcop

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/wiremesh/wiremesh/internal/ratelimit"
)

// SecondFactor is a TOTP second factor for password logins: a person with
// one enrolled gives its code after the password; one whose factor is
// required but not enrolled sets it up (QR code, then recovery codes)
// before the login completes. Logins with an upstream provider are that
// provider's business.
type SecondFactor interface {
	// Status tells whether subject has a confirmed factor and whether one
	// is required of it.
	Status(ctx context.Context, subject string) (enrolled, required bool, err error)
	// Enrol starts (or restarts) an enrolment: a new secret, returned as
	// an otpauth:// URL, its text and a PNG QR code of the URL.
	Enrol(ctx context.Context, subject, email string) (Enrolment, error)
	// Confirm checks a code of the enrolment's secret and confirms it,
	// returning recovery codes (shown once).
	Confirm(ctx context.Context, subject, code string) ([]string, error)
	// Verify checks a code of the confirmed factor, or uses up a recovery
	// code. A code is accepted once.
	Verify(ctx context.Context, subject, code string) error
}

// Enrolment is a secret being set up.
type Enrolment struct {
	URL, Secret string
	QRPNG       []byte
}

// ErrBadCode is a wrong, used or expired code.
var ErrBadCode = errors.New("wrong code")

// Wrong second-factor codes are limited per subject over all sources:
// codeBurst at once, then one more per codeRefill, so a guesser who has the
// password gets at most 5 + 288 codes a day. With about 3 codes valid at
// any time (clock skew) out of 10^6, that is under 0.09% a day, against
// about 4% under the password limits. A code refused by the limit is not
// checked at all, even a right one.
const (
	codeBurst  = 5
	codeRefill = 5 * time.Minute
	// maxCodesPerLogin wrong codes end a pending login: its person starts
	// again with the password.
	maxCodesPerLogin = 5
)

var (
	errTooManyCodes = errors.New("too many wrong codes for this account; wait five minutes")
	errLoginEnded   = errors.New("too many wrong codes for this login")
)

const mfaPath = "/login/mfa"

var mfaPage = template.Must(template.New("mfa").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:24rem;margin:4rem auto;padding:0 1rem;color:#222}
label{display:block;margin:.8rem 0 .2rem}input{width:100%;padding:.5rem;box-sizing:border-box}
button{margin-top:1.2rem;padding:.6rem 1.2rem}.err{color:#b00020}code{font-size:1.1rem}</style></head>
<body><h1>{{.Title}}</h1>
{{if .Error}}<p class="err" role="alert">{{.Error}}</p>{{end}}
{{if .Recovery}}<p>Keep these recovery codes somewhere safe. Each logs you in once if you lose your authenticator; they are not shown again.</p>
<ul>{{range .Recovery}}<li><code class="recovery">{{.}}</code></li>{{end}}</ul>
<p><a id="continue" href="{{.Continue}}">Continue</a></p>
{{else}}<form method="post" action="{{.Action}}">
<input type="hidden" name="authRequestID" value="{{.RequestID}}">
{{if .QR}}<p>Your account requires a second factor. Scan this code with an authenticator app (or enter the key by hand), then enter the code it shows.</p>
<p><img alt="QR code" width="200" height="200" src="{{.QR}}"></p><p>Key: <code id="secret">{{.Secret}}</code></p>
<input type="hidden" name="enrol" value="1">{{end}}
<label for="otp">{{if .QR}}Code from the app{{else}}Code from your authenticator app, or a recovery code{{end}}</label>
<input id="otp" name="otp" autocomplete="one-time-code" inputmode="numeric" required autofocus>
<button type="submit">Continue</button>
</form>{{end}}
</body></html>`))

type mfaData struct {
	Title, Error, Action, RequestID, Secret, Continue string
	QR                                                template.URL
	Recovery                                          []string
}

func renderMFA(w http.ResponseWriter, status int, d mfaData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = mfaPage.Execute(w, d)
}

// secondStep decides, after a right password, whether the login needs a
// second factor: it answers the page and returns true when it does.
func (p *Provider) secondStep(w http.ResponseWriter, r *http.Request, reqID string, id Identity) bool {
	if p.mfa == nil {
		return false
	}
	enrolled, required, err := p.mfa.Status(r.Context(), id.Subject)
	if err != nil {
		p.fail(w, r, pageData{Title: "Log in", Action: p.prefix + loginPath, RequestID: reqID}, err)
		return true
	}
	if !enrolled && !required {
		return false
	}
	if err := p.st.awaitFactor(reqID, id.Subject, id.Email); err != nil {
		render(w, http.StatusNotFound, pageData{Title: "Log in", Error: "This login link has expired. Start the login again from the application.", Message: " "})
		return true
	}
	d := mfaData{Title: "Second factor", Action: p.prefix + mfaPath, RequestID: reqID}
	if !enrolled {
		e, err := p.mfa.Enrol(r.Context(), id.Subject, id.Email)
		if err != nil {
			p.fail(w, r, pageData{Title: "Log in", Action: p.prefix + loginPath, RequestID: reqID}, err)
			return true
		}
		d.Title, d.Secret = "Set up a second factor", e.Secret
		d.QR = template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(e.QRPNG))
	}
	renderMFA(w, http.StatusOK, d)
	return true
}

// secondFactor serves the code form of a login whose password was right.
func (p *Provider) secondFactor(w http.ResponseWriter, r *http.Request) {
	d := mfaData{Title: "Second factor", Action: p.prefix + mfaPath}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !p.parseForm(w, r, pageData{Title: d.Title}) {
		return
	}
	d.RequestID = r.PostForm.Get("authRequestID")
	subject, email, ok := p.st.awaiting(d.RequestID)
	if !ok {
		render(w, http.StatusNotFound, pageData{Title: "Log in", Error: "This login link has expired. Start the login again from the application.", Message: " "})
		return
	}
	enrol := r.PostForm.Get("enrol") == "1"
	code := strings.ReplaceAll(strings.TrimSpace(r.PostForm.Get("otp")), " ", "")
	var recovery []string
	err := p.limited(r, subject, func() error {
		var err error
		if enrol {
			recovery, err = p.mfa.Confirm(r.Context(), subject, code)
			return err
		}
		return p.mfa.Verify(r.Context(), subject, code)
	})
	if err != nil {
		status := http.StatusUnauthorized
		switch {
		case errors.Is(err, ErrBadCode):
			if p.st.failFactor(d.RequestID) {
				p.log.Warn("login ended: too many wrong second factor codes", "subject", subject, "src", sourceFrom(r.Context()),
					"wrong_codes", maxCodesPerLogin)
				render(w, http.StatusUnauthorized, pageData{Title: "Log in", Message: " ",
					Error: "Too many wrong codes: this login has ended. Start the login again from the application."})
				return
			}
			d.Error = "Wrong or already used code. Enter the code your app shows now."
		case errors.Is(err, errTooManyCodes):
			status, d.Error = http.StatusTooManyRequests, "Too many wrong codes. Wait five minutes and try again."
		default:
			p.log.Error("second factor failed", "subject", subject, "err", err)
			status, d.Error = http.StatusInternalServerError, "The code could not be checked; try again."
		}
		if enrol {
			// A new secret: the page shows it again.
			if e, eerr := p.mfa.Enrol(r.Context(), subject, email); eerr == nil {
				d.Title, d.Secret = "Set up a second factor", e.Secret
				d.QR = template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(e.QRPNG))
			}
		}
		renderMFA(w, status, d)
		return
	}
	if err := p.st.completeLogin(d.RequestID, subject); err != nil {
		render(w, http.StatusNotFound, pageData{Title: "Log in", Error: "This login link has expired. Start the login again from the application.", Message: " "})
		return
	}
	p.log.Info("login", "subject", subject, "email", email, "second_factor", true, "enrolled", enrol)
	if enrol {
		renderMFA(w, http.StatusOK, mfaData{Title: "Recovery codes", Recovery: recovery, Continue: p.callbackURL(d.RequestID)})
		return
	}
	http.Redirect(w, r, p.callbackURL(d.RequestID), http.StatusFound)
}

// deviceFactor checks the second factor of a device approval, given in
// the same form as the password.
func (p *Provider) deviceFactor(r *http.Request, id Identity) error {
	if p.mfa == nil {
		return nil
	}
	enrolled, required, err := p.mfa.Status(r.Context(), id.Subject)
	switch {
	case err != nil:
		return err
	case enrolled:
		code := strings.ReplaceAll(strings.TrimSpace(r.PostForm.Get("otp")), " ", "")
		if code == "" {
			return errNeedCode
		}
		err := p.limited(r, id.Subject, func() error { return p.mfa.Verify(r.Context(), id.Subject, code) })
		if errors.Is(err, errTooManyCodes) {
			// The approval page answers it as a locked account (429).
			return fmt.Errorf("%w: %w", errTooManyEmail, err)
		}
		return err
	case required:
		return errEnrolFirst
	}
	return nil
}

var (
	errNeedCode   = errors.New("enter the code from your authenticator app")
	errEnrolFirst = errors.New("your account requires a second factor: log in to the dashboard once to set it up, then approve the device")
)

// limited runs a code check of subject under the code limit (codeBurst,
// codeRefill) over all sources: ErrBadCode counts as a failure, and a
// check refused by the limit does not run.
func (p *Provider) limited(r *http.Request, subject string, check func() error) error {
	src := sourceFrom(r.Context())
	k := ratelimit.Key{Subject: subject}
	res, err := p.codes.Reserve(k)
	if err != nil {
		if ok, n := p.limitLog.Allow(); ok {
			p.log.Warn("second factor refused: too many wrong codes", "subject", subject, "src", src, "err", err, "not_logged", n)
		}
		return fmt.Errorf("%w: %w", errTooManyCodes, err)
	}
	err = check()
	if !errors.Is(err, ErrBadCode) {
		res.Success()
		return err
	}
	res.Fail()
	p.log.Warn("wrong second factor code", "subject", subject, "src", src)
	// The last token spent locks the subject out: said once per lockout.
	if peek, perr := p.codes.Reserve(k); errors.Is(perr, ratelimit.ErrLimited) {
		p.log.Warn("second factor locked: too many wrong codes", "subject", subject, "src", src, "retry_after", codeRefill)
	} else {
		peek.Success()
	}
	return err
}

// failFactor counts a wrong code for a pending login and ends it at
// maxCodesPerLogin; it tells whether it did.
func (s *storage) failFactor(id string) (ended bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok {
		return false
	}
	r.factorFailures++
	if r.factorFailures < maxCodesPerLogin {
		return false
	}
	s.dropRequest(id, r)
	return true
}

// awaitFactor marks a pending login as waiting for subject's second
// factor (its password was right).
func (s *storage) awaitFactor(id, subject, email string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok || s.now().Sub(r.created) > pendingLifetime {
		return errNotFound("login request")
	}
	r.factorSubject, r.factorEmail = subject, email
	return nil
}

// awaiting is the subject whose second factor a pending login waits for.
func (s *storage) awaiting(id string) (subject, email string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, found := s.requests[id]
	if !found || r.factorSubject == "" || r.done || s.now().Sub(r.created) > pendingLifetime {
		return "", "", false
	}
	return r.factorSubject, r.factorEmail, true
}

package oidcop

import (
	"errors"
	"html/template"
	"net/http"
	"strings"
)

// The pages are deliberately plain: one form each, no scripts, so they
// work in any browser, a terminal browser over SSH, or a scripted client.
var pages = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:24rem;margin:4rem auto;padding:0 1rem;color:#222}
label{display:block;margin:.8rem 0 .2rem}input{width:100%;padding:.5rem;box-sizing:border-box}
button{margin-top:1.2rem;padding:.6rem 1.2rem}.err{color:#b00020}.ok{color:#116611}</style></head>
<body><h1>{{.Title}}</h1>
{{if .Error}}<p class="err" role="alert">{{.Error}}</p>{{end}}
{{if .Message}}<p class="ok" role="status">{{.Message}}</p>{{else}}
<form method="post" action="{{.Action}}">
{{if .RequestID}}<input type="hidden" name="authRequestID" value="{{.RequestID}}">{{end}}
{{if .Device}}<label for="user_code">Code shown on the device</label>
<input id="user_code" name="user_code" value="{{.UserCode}}" autocomplete="off" required>{{end}}
<label for="email">E-mail</label><input id="email" name="email" type="email" value="{{.Email}}" autocomplete="username" required autofocus>
<label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required>
{{if .OTP}}<label for="otp">Authenticator code (if you set one up)</label><input id="otp" name="otp" autocomplete="one-time-code" inputmode="numeric">{{end}}
<button type="submit">{{if .Device}}Approve device{{else}}Log in{{end}}</button>
</form>
{{if .Buttons}}<p>or</p>{{range .Buttons}}<p><a class="idp" href="{{.URL}}">Log in with {{.Name}}</a></p>{{end}}{{end}}{{end}}
</body></html>`))

type pageData struct {
	Title, Error, Message, Action, RequestID, UserCode, Email string
	Device                                                    bool
	// OTP asks for a second factor's code in the same form (device).
	OTP bool
	// Buttons log in with upstream identity providers.
	Buttons []loginButton
}

// loginButton is a "Log in with <Name>" link.
type loginButton struct{ Name, URL string }

// renderLogin renders the login page with the upstream providers offered.
func (p *Provider) renderLogin(w http.ResponseWriter, r *http.Request, status int, d pageData) {
	d.Buttons = p.upstreamButtons(r, d.RequestID)
	render(w, status, d)
}

func render(w http.ResponseWriter, status int, d pageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = pages.Execute(w, d)
}

// maxForm bounds what a login form may post.
const maxForm = 16 << 10

func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	d := pageData{Title: "Log in", Action: p.prefix + loginPath}
	switch r.Method {
	case http.MethodGet:
		if !p.parseForm(w, r, d) {
			return
		}
		d.RequestID = r.Form.Get("authRequestID")
		if _, err := p.st.AuthRequestByID(r.Context(), d.RequestID); err != nil {
			d.Error, d.Message = "This login link has expired. Start the login again from the application.", " "
			render(w, http.StatusNotFound, d)
			return
		}
		p.renderLogin(w, r, http.StatusOK, d)
	case http.MethodPost:
		if !p.parseForm(w, r, d) {
			return
		}
		d.RequestID, d.Email = r.PostForm.Get("authRequestID"), r.PostForm.Get("email")
		id, err := p.authenticate(r, d.Email, r.PostForm.Get("password"))
		if err != nil {
			p.fail(w, r, d, err)
			return
		}
		if p.secondStep(w, r, d.RequestID, id) {
			return
		}
		if err := p.st.completeLogin(d.RequestID, id.Subject); err != nil {
			d.Error, d.Message = "This login link has expired. Start the login again from the application.", " "
			render(w, http.StatusNotFound, d)
			return
		}
		p.log.Info("login", "subject", id.Subject, "email", id.Email)
		http.Redirect(w, r, p.callbackURL(d.RequestID), http.StatusFound)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (p *Provider) device(w http.ResponseWriter, r *http.Request) {
	d := pageData{Title: "Approve a device", Action: p.prefix + devicePath, Device: true, OTP: p.mfa != nil}
	switch r.Method {
	case http.MethodGet:
		if !p.parseForm(w, r, d) {
			return
		}
		d.UserCode = r.Form.Get("user_code")
		render(w, http.StatusOK, d)
	case http.MethodPost:
		if !p.parseForm(w, r, d) {
			return
		}
		d.UserCode = strings.ToUpper(strings.TrimSpace(r.PostForm.Get("user_code")))
		d.Email = r.PostForm.Get("email")
		id, err := p.authenticate(r, d.Email, r.PostForm.Get("password"))
		if err != nil {
			p.fail(w, r, d, err)
			return
		}
		if err := p.deviceFactor(r, id); err != nil {
			p.fail(w, r, d, err)
			return
		}
		if err := p.st.completeDevice(d.UserCode, id.Subject, true); err != nil {
			d.Error = "Unknown or expired code. Check the code the device shows, or start its login again."
			render(w, http.StatusNotFound, d)
			return
		}
		p.log.Info("device approved", "subject", id.Subject, "email", id.Email)
		d.Message = "Device approved. You can close this window and return to the device."
		render(w, http.StatusOK, d)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// parseForm reads a bounded form, answering the page with an error when
// it cannot or when a field is too long.
func (p *Provider) parseForm(w http.ResponseWriter, r *http.Request, d pageData) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		p.st.refusedFields.Add(1)
		d.Error = "The form could not be read."
		render(w, http.StatusBadRequest, d)
		return false
	}
	if err := checkParams(r.Form); err != nil {
		p.st.refusedFields.Add(1)
		d.Error = "The form could not be read: " + err.Error() + "."
		render(w, http.StatusBadRequest, d)
		return false
	}
	return true
}

func (p *Provider) fail(w http.ResponseWriter, r *http.Request, d pageData, err error) {
	switch {
	case errors.Is(err, ErrBadCredentials):
		d.Error = "Wrong e-mail address or password."
		p.renderLogin(w, r, http.StatusUnauthorized, d)
	case errors.Is(err, errTooMany):
		d.Error = "Too many failed logins for this e-mail address from your address. Wait a minute and try again."
		p.renderLogin(w, r, http.StatusTooManyRequests, d)
	case errors.Is(err, ErrBadCode):
		d.Error = "Wrong or already used authenticator code."
		p.renderLogin(w, r, http.StatusUnauthorized, d)
	case errors.Is(err, errNeedCode), errors.Is(err, errEnrolFirst):
		d.Error = strings.ToUpper(err.Error()[:1]) + err.Error()[1:] + "."
		p.renderLogin(w, r, http.StatusUnauthorized, d)
	case errors.Is(err, errTooManyEmail):
		d.Error = "Too many failed logins for this e-mail address. Wait a few minutes and try again."
		p.renderLogin(w, r, http.StatusTooManyRequests, d)
	default:
		p.log.Error("login failed", "err", err, "remote", r.RemoteAddr)
		d.Error = "Login failed: " + err.Error()
		p.renderLogin(w, r, http.StatusForbidden, d)
	}
}

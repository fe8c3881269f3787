package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"mime/quotedprintable"
	"net/mail"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/wiremesh/wiremesh/internal/smtptest"
	"github.com/wiremesh/wiremesh/internal/testcert"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/idp"
	"github.com/wiremesh/wiremesh/management/mailer"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

var inviteLinkRE = regexp.MustCompile(`https?://\S+/invite\?token=(nbi_[A-Za-z0-9_-]+)`)

// mailedLink reads an invitation mail: it must be addressed to to, and
// its decoded body must hold a link to base; it returns the link's token.
func mailedLink(t *testing.T, m smtptest.Message, to, base string) string {
	t.Helper()
	if !m.TLS || m.User != "mailer" || len(m.To) != 1 || m.To[0] != to {
		t.Fatalf("mail session: TLS %v, user %q, to %v", m.TLS, m.User, m.To)
	}
	msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get("To") != "<"+to+">" || msg.Header.Get("Subject") != "You are invited to wiremesh" || !strings.Contains(msg.Header.Get("From"), "noreply@example.com") {
		t.Fatalf("mail headers %v", msg.Header)
	}
	body, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if err != nil {
		t.Fatal(err)
	}
	link := inviteLinkRE.FindStringSubmatch(string(body))
	if link == nil || !strings.HasPrefix(link[0], base+"/invite?token=nbi_") || !strings.Contains(string(body), to) {
		t.Fatalf("no invitation link to %s in:\n%s", base, body)
	}
	return link[1]
}

// mailRig starts a server with the built-in provider mailing invitations
// through an SMTP server on STARTTLS with AUTH PLAIN.
func mailRig(t *testing.T, eng storetest.Engine) (*env, api, *smtptest.Server) {
	t.Helper()
	cert := testcert.New(t)
	smtp := smtptest.Start(t, smtptest.Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert.TLS}}, Username: "mailer", Password: "Mail-pw-1"})
	m, err := mailer.New(mailer.Config{Host: smtp.Host, Port: smtp.Port, Username: "mailer", Password: "Mail-pw-1", From: "Wiremesh <noreply@example.com>",
		RootCAs: cert.Pool}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := startOn(t, eng, server.Options{Identity: server.Identity{BuiltInIssuer: autoIssuer}, Mail: server.Mail{Mailer: m}})
	setup := obj(e.api("").call("POST", "/api/setup", map[string]any{"email": "o@example.com", "password": "Owner-passw0rd!", "name": "O", "create_pat": true}, 200))
	return e, e.api("Token " + setup["personal_access_token"].(string)), smtp
}

// passwordLink reads a user's password link from the store.
func passwordLink(t *testing.T, e *env, acc account.ID, id string) (store.PasswordLink, error) {
	t.Helper()
	var l store.PasswordLink
	err := e.srv.Store.Read(context.Background(), func(tx *store.Tx) error {
		var err error
		l, err = tx.In(acc).PasswordLinkOf(context.Background(), account.UserID(id))
		return err
	})
	return l, err
}

func hasEvent(o api, code, target string) bool {
	for _, ev := range list(o.call("GET", "/api/events/audit", nil, 200)) {
		if obj(ev)["activity_code"] == code && obj(ev)["target_id"] == target {
			return true
		}
	}
	return false
}

// TestInviteByMailREST: with SMTP configured, POST /api/users mails the
// new person a link (never in the API's answer) that sets the password at
// the built-in provider; POST /api/users/{id}/invite mails a fresh link
// and the old one stops working; the person then logs in through the
// provider's login page; SMTP failures answer 502 and leave nothing valid.
func TestInviteByMailREST(t *testing.T) { engines.Each(t, testInviteByMailREST) }

func testInviteByMailREST(t *testing.T, eng storetest.Engine) {
	e, owner, smtp := mailRig(t, eng)
	anon := e.api("")
	base := "http://" + e.addr

	// The invitation: a user, a mail, no password or link in the answer.
	created := obj(owner.call("POST", "/api/users", map[string]any{"email": "new@example.com", "name": "New Person", "role": "user",
		"auto_groups": []string{}, "is_service_user": false}, 200))
	id, _ := created["id"].(string)
	if _, has := created["password"]; has || id == "" || created["email"] != "new@example.com" || strings.Contains(string(mustJSON(created)), "nbi_") {
		t.Fatalf("created %v", created)
	}
	first := mailedLink(t, smtp.Wait(t, 1), "new@example.com", base)
	if !hasEvent(owner, "user.invite", id) {
		t.Fatal("no user.invite event")
	}
	info := obj(anon.call("GET", "/api/users/invites/"+first, nil, 200))
	if info["email"] != "new@example.com" || info["name"] != "New Person" || info["valid"] != true || info["invited_by"] != "O" {
		t.Fatalf("invite info %v", info)
	}
	// A duplicate gets no mail.
	owner.call("POST", "/api/users", map[string]any{"email": "NEW@example.com", "role": "user", "auto_groups": []string{}, "is_service_user": false}, 409)
	owner.call("POST", "/api/users", map[string]any{"email": "x@example.com", "role": "user", "auto_groups": []string{"nope"}, "is_service_user": false}, 422)
	// The generated password the user was stored with is nobody's.
	if len(smtp.Messages()) != 1 {
		t.Fatalf("%d mails, want 1", len(smtp.Messages()))
	}

	// Resending: a fresh link, the old one dead.
	if got := obj(owner.call("POST", "/api/users/"+id+"/invite", nil, 200)); len(got) != 0 {
		t.Fatalf("resend answered %v", got)
	}
	second := mailedLink(t, smtp.Wait(t, 2), "new@example.com", base)
	if second == first {
		t.Fatal("the same link mailed again")
	}
	anon.call("GET", "/api/users/invites/"+first, nil, 404)
	anon.call("POST", "/api/users/invites/"+first+"/accept", map[string]string{"password": "N3w!password"}, 404)

	// Following the link: the password is set once.
	anon.call("POST", "/api/users/invites/"+second+"/accept", map[string]string{"password": "weakpassword"}, 422)
	anon.call("POST", "/api/users/invites/"+second+"/accept", map[string]string{"password": "N3w!password"}, 200)
	anon.call("POST", "/api/users/invites/"+second+"/accept", map[string]string{"password": "0ther!Passw0rd"}, 404)
	anon.call("GET", "/api/users/invites/"+second, nil, 404)
	if !hasEvent(owner, "user.invite.link.accept", id) {
		t.Fatal("no user.invite.link.accept event")
	}

	// ... and the person logs in with it at the built-in provider.
	ctx := context.Background()
	ep := e.srv.IdP.Endpoints()
	conf := &oauth2.Config{ClientID: idp.DashboardClientID, RedirectURL: base + idp.DashboardCallbackPath, Scopes: []string{"openid", "email", "profile"},
		Endpoint: oauth2.Endpoint{AuthURL: ep.Authorization, TokenURL: ep.Token, AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	back := browserLogin(t, conf.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)), "new@example.com", "N3w!password")
	tok, err := conf.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("code exchange: %v", err)
	}
	me := obj(e.api("Bearer "+tok.AccessToken).call("GET", "/api/users/current", nil, 200))
	if me["id"] != id || me["email"] != "new@example.com" || me["role"] != "user" {
		t.Fatalf("logged in as %v", me)
	}
	// Logged in: nothing to invite to any more.
	owner.call("POST", "/api/users/"+id+"/invite", nil, 422)
	owner.call("POST", "/api/users/nobody/invite", nil, 404)
	svc := obj(owner.call("POST", "/api/users", map[string]any{"name": "ci", "role": "user", "auto_groups": []string{}, "is_service_user": true}, 200))
	owner.call("POST", "/api/users/"+svc["id"].(string)+"/invite", nil, 422)

	// The SMTP server refuses: 502, and nothing was stored.
	before := len(list(owner.call("GET", "/api/users", nil, 200)))
	smtp.Refuse(errors.New("relaying denied"))
	res := obj(owner.call("POST", "/api/users", map[string]any{"email": "second@example.com", "role": "user", "auto_groups": []string{}, "is_service_user": false}, 502))
	if msg, _ := res["message"].(string); !strings.Contains(msg, "invitation e-mail could not be sent") || !strings.Contains(msg, "relaying denied") {
		t.Fatalf("502 message %q", msg)
	}
	if n := len(list(owner.call("GET", "/api/users", nil, 200))); n != before {
		t.Fatalf("%d users after a failed invitation, want %d", n, before)
	}

	// A pending invitation whose resend fails: neither its old link nor
	// the new one is left valid.
	smtp.Refuse(nil)
	third := obj(owner.call("POST", "/api/users", map[string]any{"email": "third@example.com", "role": "user", "auto_groups": []string{}, "is_service_user": false}, 200))
	thirdLink := mailedLink(t, smtp.Wait(t, 3), "third@example.com", base)
	acc := account.ID(obj(list(owner.call("GET", "/api/accounts", nil, 200))[0])["id"].(string))
	if _, err := passwordLink(t, e, acc, third["id"].(string)); err != nil {
		t.Fatalf("third's link: %v", err)
	}
	smtp.Refuse(errors.New("mailbox full"))
	owner.call("POST", "/api/users/"+third["id"].(string)+"/invite", nil, 502)
	anon.call("GET", "/api/users/invites/"+thirdLink, nil, 404)
	if _, err := passwordLink(t, e, acc, third["id"].(string)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a link is left after the failed resend: %v", err)
	}
	if n := len(smtp.Messages()); n != 3 {
		t.Fatalf("%d mails accepted, want 3", n)
	}
	// SMTP back: the resend works.
	smtp.Refuse(nil)
	owner.call("POST", "/api/users/"+third["id"].(string)+"/invite", nil, 200)
	again := mailedLink(t, smtp.Wait(t, 4), "third@example.com", base)
	anon.call("GET", "/api/users/invites/"+again, nil, 200)

	// Blocking withdraws the link.
	owner.call("PUT", "/api/users/"+third["id"].(string), map[string]any{"role": "user", "auto_groups": []string{}, "is_blocked": true}, 200)
	anon.call("GET", "/api/users/invites/"+again, nil, 404)
	owner.call("POST", "/api/users/"+third["id"].(string)+"/invite", nil, 422)

	// The SMTP server is gone: 502 as well.
	smtp.Close()
	owner.call("POST", "/api/users", map[string]any{"email": "fourth@example.com", "role": "user", "auto_groups": []string{}, "is_service_user": false}, 502)
	if n := len(list(owner.call("GET", "/api/users", nil, 200))); n != before+1 {
		t.Fatalf("%d users, want %d", n, before+1)
	}
}

// TestInviteWithoutSMTPREST: without SMTP, POST /api/users returns a
// generated password as before and POST /api/users/{id}/invite answers
// 412 saying how to configure SMTP.
func TestInviteWithoutSMTPREST(t *testing.T) { engines.Each(t, testInviteWithoutSMTPREST) }

func testInviteWithoutSMTPREST(t *testing.T, eng storetest.Engine) {
	_, owner := ownerAPI(t, eng)
	u := obj(owner.call("POST", "/api/users", map[string]any{"email": "p@example.com", "role": "user", "auto_groups": []string{}, "is_service_user": false}, 200))
	if pw, _ := u["password"].(string); len(pw) < 16 {
		t.Fatalf("no generated password: %v", u)
	}
	res := obj(owner.call("POST", "/api/users/"+u["id"].(string)+"/invite", nil, 412))
	if msg, _ := res["message"].(string); !strings.Contains(msg, "--smtp-host") || !strings.Contains(msg, "NB_SMTP_PASSWORD") {
		t.Fatalf("412 message %q", msg)
	}

	// Unknown invitation tokens are limited per source on the public
	// calls; a valid token is never refused.
	inv := obj(owner.call("POST", "/api/users/invites", map[string]any{"email": "inv@example.com", "name": "Inv", "role": "user", "auto_groups": []string{}}, 200))
	token := inv["invite_token"].(string)
	anon := api{t: t, base: owner.base}
	for i := range 10 {
		anon.call("GET", "/api/users/invites/nbi_guess"+strconv.Itoa(i), nil, 404)
	}
	anon.call("GET", "/api/users/invites/nbi_guess10", nil, 429)
	anon.call("POST", "/api/users/invites/nbi_guess11/accept", map[string]string{"password": "N3w!password"}, 429)
	anon.call("GET", "/api/users/invites/"+token, nil, 200)
	anon.call("POST", "/api/users/invites/"+token+"/accept", map[string]string{"password": "N3w!password"}, 200)
}

// TestMailNeedsBuiltInIdP: invitation e-mails with an external identity
// provider, or a link that is not an absolute http(s) URL, stop the
// server at start.
func TestMailNeedsBuiltInIdP(t *testing.T) {
	m, err := mailer.New(mailer.Config{Host: "127.0.0.1", TLS: mailer.NoTLS, From: "n@example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		o    server.Options
		want string
	}{
		{name: "no built-in provider", o: server.Options{Mail: server.Mail{Mailer: m}}, want: "need the built-in identity provider"},
		{name: "relative invite URL", o: server.Options{Identity: server.Identity{BuiltInIssuer: "http://127.0.0.1:1/oauth2"},
			Mail: server.Mail{Mailer: m, InviteURL: "/invite"}}, want: "not an absolute http(s) URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.o.Store = store.Config{Engine: store.SQLite, DataDir: t.TempDir()}
			s, err := server.Open(context.Background(), c.o)
			if err == nil {
				s.Close()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

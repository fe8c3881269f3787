package server

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/wiremesh/wiremesh/management/users"
)

// Mail configures invitation e-mails (built-in identity provider only).
type Mail struct {
	// Mailer sends them (nil: none are sent; POST /api/users returns a
	// generated password and POST /api/users/{id}/invite answers 412).
	Mailer users.Mailer
	// InviteURL is the page the mails link to, ?token= added (empty: the
	// dashboard this server serves, <built-in issuer origin>/invite).
	InviteURL string
}

// inviteURL resolves where invitation mails link to.
func (m Mail) inviteURL(id Identity) (string, error) {
	if m.Mailer == nil {
		return "", nil
	}
	if id.BuiltInIssuer == "" {
		return "", errors.New("invitation e-mails (SMTP) need the built-in identity provider: with an external one, invite users there")
	}
	raw := m.InviteURL
	if raw == "" {
		u, err := url.Parse(id.BuiltInIssuer)
		if err != nil {
			return "", fmt.Errorf("built-in issuer: %w", err)
		}
		raw = u.Scheme + "://" + u.Host + "/invite"
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.Fragment != "" {
		return "", fmt.Errorf("invite URL %q is not an absolute http(s) URL without a fragment", raw)
	}
	return raw, nil
}

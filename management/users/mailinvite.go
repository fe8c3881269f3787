package users

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/mailer"
	"github.com/wiremesh/wiremesh/management/store"
)

// This file holds invitations by e-mail (built-in identity provider, with
// Options.Mailer): a person created with POST /api/users gets a mail with
// a single-use link that sets the password (a store.PasswordLink, whose
// token is an nbi_ secret like an invitation link's, kept as its hash);
// ResendInvite mails a fresh one to a user who has not logged in yet, and
// the old link stops working. The link opens the dashboard's invite page
// (Options.InviteURL), whose two public calls, LookupInvite and
// AcceptInvite, take both kinds of token. A mail that does not go leaves
// no valid token behind.

// Mailer delivers one message (package mailer's *Mailer).
type Mailer interface {
	Send(ctx context.Context, m mailer.Message) error
}

// MailInvites reports whether invitations are sent by e-mail.
func (s *Service) MailInvites() bool { return s.o.LocalIdP && s.o.Mailer != nil }

// inviteLink is the URL an invitation mail carries.
func (s *Service) inviteLink(token string) (string, error) {
	u, err := url.Parse(s.o.InviteURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("invitation link base %q is not an absolute URL", s.o.InviteURL)
	}
	q := u.Query()
	q.Set("token", token)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// inviteMail composes the invitation of u by inviter.
func (s *Service) inviteMail(u, inviter account.User, link string, expires time.Time) mailer.Message {
	by := strings.TrimSpace(inviter.Name)
	if by == "" || by == inviter.Email {
		by = "An administrator"
	}
	if inviter.Email != "" {
		by += " (" + inviter.Email + ")"
	}
	host := ""
	if l, err := url.Parse(link); err == nil {
		host = " at " + l.Host
	}
	name := strings.TrimSpace(u.Name)
	if name == "" || name == u.Email {
		name = "there"
	}
	text := fmt.Sprintf("Hello %s,\n\n%s invited you to the wiremesh network%s.\n\n"+
		"Choose your password and log in with this link. It works once, until %s:\n\n%s\n\n"+
		"Your login is your e-mail address, %s.\n\n"+
		"If you did not expect this invitation, ignore this message; without the link nobody can use it.\n",
		name, by, host, expires.UTC().Format("Mon, 02 Jan 2006 15:04 MST"), link, u.Email)
	return mailer.Message{To: u.Email, Subject: "You are invited to wiremesh", Text: text}
}

// sendInvite mails the link of token to u.
func (s *Service) sendInvite(ctx context.Context, u, inviter account.User, token string, expires time.Time) error {
	link, err := s.inviteLink(token)
	if err != nil {
		return err
	}
	if err := s.o.Mailer.Send(ctx, s.inviteMail(u, inviter, link, expires)); err != nil {
		return fmt.Errorf("%w to %s: %w", ErrMailFailed, u.Email, err)
	}
	return nil
}

// inviterOf is the user an invitation names: the caller, or for a service
// user (a script) the account's owner, as the reference does.
func inviterOf(ctx context.Context, at *store.AccountTx, caller account.User) account.User {
	if !caller.ServiceUser {
		return caller
	}
	us, err := at.Users(ctx)
	if err != nil {
		return caller
	}
	for _, u := range us {
		if u.Role == account.RoleOwner {
			return u
		}
	}
	return caller
}

// createInvited is Create for a person when invitations go by e-mail: the
// user is stored with an unusable random password and a password link,
// which is mailed first; nothing is stored when the mail does not go. The
// API answer then holds neither a password nor the link.
func (s *Service) createInvited(ctx context.Context, caller account.User, u account.User, hash string) (account.User, error) {
	token, err := auth.NewSecret("nbi_")
	if err != nil {
		return account.User{}, err
	}
	now := s.now()
	link := store.PasswordLink{Subject: u.ID, AccountID: u.AccountID, Hash: auth.HashSecret(token), ExpiresAt: now.Add(DefaultInviteTTL),
		CreatedBy: caller.ID, CreatedAt: now}
	// The checks of the insert below, before a mail goes out: a refused
	// user gets none.
	var inviter account.User
	err = s.o.Store.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		if err := checkGroups(ctx, at, u.AutoGroups); err != nil {
			return err
		}
		if _, err := tx.CredentialByEmail(ctx, u.Email); err == nil {
			return fmt.Errorf("%w: a user with e-mail %s", ErrConflict, u.Email)
		}
		inviter = inviterOf(ctx, at, caller)
		return nil
	})
	if err != nil {
		return account.User{}, mapErr(err)
	}
	if err := s.sendInvite(ctx, u, inviter, token, link.ExpiresAt); err != nil {
		return account.User{}, err
	}
	err = s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		if err := checkGroups(ctx, at, u.AutoGroups); err != nil {
			return err
		}
		if _, err := tx.CredentialByEmail(ctx, u.Email); err == nil {
			return fmt.Errorf("%w: a user with e-mail %s", ErrConflict, u.Email)
		}
		if err := tx.InsertCredential(ctx, account.Credential{Subject: u.ID, Email: u.Email, Name: u.Name, PasswordHash: hash, CreatedAt: now}); err != nil {
			return err
		}
		if err := insertUser(ctx, at, u); err != nil {
			return err
		}
		if err := at.PutPasswordLink(ctx, link); err != nil {
			return err
		}
		_, err := at.InsertEvent(ctx, account.Event{At: now, Activity: "user.invite", Initiator: string(caller.ID), Target: string(u.ID),
			Meta: map[string]string{"name": u.Name, "email": u.Email, "role": string(u.Role), "delivery": "email"}})
		return err
	})
	if err != nil {
		// The mail went, but its token was never stored: the link is dead.
		s.o.Log.WarnContext(ctx, "invitation mailed but the user was not created; its link does not work", "email", u.Email, "err", err)
		return account.User{}, mapErr(err)
	}
	s.o.Log.InfoContext(ctx, "user invited by e-mail", "user", u.ID, "email", u.Email, "by", caller.ID)
	return u, nil
}

// ResendInvite mails a user who has not logged in yet a fresh link to set
// its password; the previous link stops working. Without an SMTP server
// it answers ErrNoInviteDelivery, with an external identity provider too
// (invitations are that provider's business). When the mail does not go
// (ErrMailFailed) no link of the user is left valid.
func (s *Service) ResendInvite(ctx context.Context, caller account.User, id account.UserID) error {
	if err := require(caller, auth.Users, auth.Create); err != nil {
		return err
	}
	var u, inviter account.User
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		var err error
		if u, err = at.User(ctx, id); err != nil {
			return err
		}
		if err := resendable(u); err != nil {
			return err
		}
		if s.MailInvites() {
			if _, err := tx.Credential(ctx, id); errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%w: %s logs in with an identity provider and has no password to set", ErrInvalid, id)
			} else if err != nil {
				return err
			}
		}
		inviter = inviterOf(ctx, at, caller)
		return nil
	})
	switch {
	case err != nil:
		return mapErr(err)
	case !s.o.LocalIdP:
		return fmt.Errorf("%w: with an external identity provider, invite the user there", ErrNoInviteDelivery)
	case s.o.Mailer == nil:
		return ErrNoInviteDelivery
	}
	token, err := auth.NewSecret("nbi_")
	if err != nil {
		return err
	}
	now := s.now()
	link := store.PasswordLink{Subject: u.ID, AccountID: u.AccountID, Hash: auth.HashSecret(token), ExpiresAt: now.Add(DefaultInviteTTL),
		CreatedBy: caller.ID, CreatedAt: now}
	// The new link replaces the old before the mail goes: whatever
	// happens next, the old one no longer works.
	err = s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		cur, err := at.User(ctx, id)
		if err != nil {
			return err
		}
		if err := resendable(cur); err != nil {
			return err
		}
		return at.PutPasswordLink(ctx, link)
	})
	if err != nil {
		return mapErr(err)
	}
	if err := s.sendInvite(ctx, u, inviter, token, link.ExpiresAt); err != nil {
		// Not mailed: the new link must not stay valid either. A fresh
		// context: the caller's may be what ended the send.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		derr := s.o.Store.Tx(dctx, func(tx *store.Tx) error {
			return tx.In(caller.AccountID).DeletePasswordLink(dctx, id, link.Hash)
		})
		if derr != nil && !errors.Is(derr, store.ErrNotFound) {
			s.o.Log.ErrorContext(ctx, "invitation not mailed and its link not withdrawn; it expires unused", "user", id, "expires", link.ExpiresAt, "err", derr)
		}
		return err
	}
	err = s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		_, err := tx.In(caller.AccountID).InsertEvent(ctx, account.Event{At: now, Activity: "user.invite", Initiator: string(caller.ID), Target: string(id),
			Meta: map[string]string{"email": u.Email, "name": u.Name, "delivery": "email", "resent": "true"}})
		return err
	})
	if err != nil {
		// The mail went and its link works: report success, log the gap.
		s.o.Log.ErrorContext(ctx, "invitation mailed but its event not recorded", "user", id, "err", err)
	}
	s.o.Log.InfoContext(ctx, "invitation mailed again", "user", id, "email", u.Email, "by", caller.ID)
	return nil
}

// resendable refuses users who cannot be invited again.
func resendable(u account.User) error {
	switch {
	case u.ServiceUser:
		return fmt.Errorf("%w: service users are not invited", ErrInvalid)
	case !u.LastLogin.IsZero():
		return fmt.Errorf("%w: %s has logged in already; there is nothing to invite to", ErrInvalid, u.ID)
	case u.Blocked:
		return fmt.Errorf("%w: %s is blocked; unblock the user first", ErrInvalid, u.ID)
	case u.Email == "":
		return fmt.Errorf("%w: %s has no e-mail address", ErrInvalid, u.ID)
	}
	return nil
}

// lookupPasswordLink describes a password link to whoever holds its token
// (as LookupInvite does an invitation).
func (s *Service) lookupPasswordLink(ctx context.Context, tx *store.Tx, hash string) (InviteInfo, error) {
	l, err := tx.PasswordLinkByHash(ctx, hash)
	if err != nil {
		return InviteInfo{}, err
	}
	at := tx.In(l.AccountID)
	u, err := at.User(ctx, l.Subject)
	if err != nil {
		return InviteInfo{}, err
	}
	info := InviteInfo{Invite: account.Invite{AccountID: l.AccountID, Email: u.Email, Name: u.Name, Role: u.Role, AutoGroups: u.AutoGroups,
		ExpiresAt: l.ExpiresAt, CreatedBy: l.CreatedBy, CreatedAt: l.CreatedAt}, Valid: s.now().Before(l.ExpiresAt), User: u.ID}
	if by, err := at.User(ctx, l.CreatedBy); err == nil {
		info.InvitedBy = by.Name
	}
	return info, nil
}

// acceptPasswordLink sets the password of a password link's user (hash
// is the bcrypt hash of the password, token the link's) and spends the
// link.
func (s *Service) acceptPasswordLink(ctx context.Context, token, hash string) (account.User, error) {
	now := s.now()
	var u account.User
	err := s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		l, err := tx.PasswordLinkByHash(ctx, auth.HashSecret(token))
		if err != nil {
			return err
		}
		if !now.Before(l.ExpiresAt) {
			return fmt.Errorf("%w: the invitation expired at %s; ask for a new one", ErrExpired, l.ExpiresAt.Format(time.RFC3339))
		}
		at := tx.In(l.AccountID)
		if u, err = at.User(ctx, l.Subject); err != nil {
			return err
		}
		if u.Blocked {
			return ErrBlocked
		}
		if err := tx.SetPassword(ctx, u.ID, hash); err != nil {
			return err
		}
		if err := at.DeletePasswordLink(ctx, u.ID, l.Hash); err != nil {
			return err
		}
		// Sessions of the password generated at creation end with it.
		if err := tx.DeleteRefreshTokensOf(ctx, string(u.ID), "", now); err != nil {
			return err
		}
		_, err = at.InsertEvent(ctx, account.Event{At: now, Activity: "user.invite.link.accept", Initiator: string(u.ID), Target: string(u.ID),
			Meta: map[string]string{"email": u.Email, "delivery": "email"}})
		return err
	})
	if err != nil {
		return account.User{}, mapErr(err)
	}
	s.o.Log.InfoContext(ctx, "invitation accepted", "user", u.ID, "email", u.Email)
	return u, nil
}

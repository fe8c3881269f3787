package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wiremesh/wiremesh/management/account"
)

// This file holds users, personal access tokens, invitations and the
// built-in identity provider's credentials. Lookups by token hash and by
// user ID cross accounts, for authentication; everything else is bound to
// one account.

const userCols = `id, account_id, email, name, role, blocked, service_user, auto_groups, issued, created_at, last_login, email_verified, pending_approval`

func scanUser(sc scanner) (account.User, error) {
	var (
		u                     account.User
		id, acc, role, groups string
		created, login        int64
	)
	if err := sc.Scan(&id, &acc, &u.Email, &u.Name, &role, &u.Blocked, &u.ServiceUser, &groups, &u.Issued, &created, &login, &u.EmailVerified, &u.PendingApproval); err != nil {
		return u, mapErr(err)
	}
	if err := json.Unmarshal([]byte(groups), &u.AutoGroups); err != nil {
		return u, fmt.Errorf("user %s: bad auto groups: %w", id, err)
	}
	u.ID, u.AccountID, u.Role = account.UserID(id), account.ID(acc), account.Role(role)
	u.CreatedAt, u.LastLogin = fromNanos(created), fromNanos(login)
	return u, nil
}

func jsonList(v []string) (string, error) {
	if v == nil {
		v = []string{}
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// UserByID finds a user in whatever account it belongs to: this is how a
// token's subject is placed in its account.
func (tx *Tx) UserByID(ctx context.Context, id account.UserID) (account.User, error) {
	return scanUser(tx.q.queryRow(ctx, `SELECT `+userCols+` FROM users WHERE id = ?`, string(id)))
}

// Users lists the account's users, oldest first.
func (a *AccountTx) Users(ctx context.Context) ([]account.User, error) {
	return queryAll(ctx, a.q(), scanUser, `SELECT `+userCols+` FROM users WHERE account_id = ? ORDER BY created_at, id`, string(a.id))
}

// User finds one of the account's users.
func (a *AccountTx) User(ctx context.Context, id account.UserID) (account.User, error) {
	return scanUser(a.q().queryRow(ctx, `SELECT `+userCols+` FROM users WHERE id = ? AND account_id = ?`, string(id), string(a.id)))
}

// UserByEmail finds one of the account's users by e-mail address
// (case-insensitive).
func (a *AccountTx) UserByEmail(ctx context.Context, email string) (account.User, error) {
	return scanUser(a.q().queryRow(ctx, `SELECT `+userCols+` FROM users WHERE LOWER(email) = LOWER(?) AND email <> '' AND account_id = ?`, email, string(a.id)))
}

// HasOwner reports whether the account has an owner.
func (a *AccountTx) HasOwner(ctx context.Context) (bool, error) {
	return a.exists(ctx, `SELECT COUNT(*) FROM users WHERE account_id = ? AND role = ?`, string(a.id), string(account.RoleOwner))
}

// InsertUser adds a user; an ID in use (in any account) is ErrConflict.
func (a *AccountTx) InsertUser(ctx context.Context, u account.User) error {
	if err := a.owns("user", u.AccountID); err != nil {
		return err
	}
	groups, err := jsonList(u.AutoGroups)
	if err != nil {
		return err
	}
	_, err = a.q().exec(ctx, `INSERT INTO users (`+userCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		string(u.ID), string(u.AccountID), u.Email, u.Name, string(u.Role), u.Blocked, u.ServiceUser, groups, u.Issued, nanos(u.CreatedAt), nanos(u.LastLogin), u.EmailVerified,
		u.PendingApproval)
	return mapErr(err)
}

// UpdateUser rewrites a user's mutable fields.
func (a *AccountTx) UpdateUser(ctx context.Context, u account.User) error {
	groups, err := jsonList(u.AutoGroups)
	if err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `UPDATE users SET email = ?, name = ?, role = ?, blocked = ?, auto_groups = ?, last_login = ?, email_verified = ?, pending_approval = ? WHERE id = ? AND account_id = ?`,
		u.Email, u.Name, string(u.Role), u.Blocked, groups, nanos(u.LastLogin), u.EmailVerified, u.PendingApproval, string(u.ID), string(a.id))
	return affected(n, err)
}

// DeleteUser removes a user and its tokens.
func (a *AccountTx) DeleteUser(ctx context.Context, id account.UserID) error {
	n, err := a.q().exec(ctx, `DELETE FROM users WHERE id = ? AND account_id = ?`, string(id), string(a.id))
	return affected(n, err)
}

// UserPeers lists the peers a user added.
func (a *AccountTx) UserPeers(ctx context.Context, id account.UserID) ([]account.Peer, error) {
	return queryAll(ctx, a.q(), scanPeer, `SELECT `+peerCols+` FROM peers WHERE account_id = ? AND user_id = ? ORDER BY created_at, id`, string(a.id), string(id))
}

// --- personal access tokens ---

const tokenCols = `id, account_id, user_id, name, token_hash, expires_at, created_by, created_at, last_used`

func scanToken(sc scanner) (account.Token, error) {
	var (
		t                  account.Token
		id, acc, user, by  string
		exp, created, used int64
	)
	if err := sc.Scan(&id, &acc, &user, &t.Name, &t.Hash, &exp, &by, &created, &used); err != nil {
		return t, mapErr(err)
	}
	t.ID, t.AccountID, t.UserID, t.CreatedBy = account.TokenID(id), account.ID(acc), account.UserID(user), account.UserID(by)
	t.ExpiresAt, t.CreatedAt, t.LastUsed = fromNanos(exp), fromNanos(created), fromNanos(used)
	return t, nil
}

// TokenByHash finds a personal access token by the hash of its secret, in
// whatever account it belongs to: this is how a REST caller authenticates.
func (tx *Tx) TokenByHash(ctx context.Context, hash string) (account.Token, error) {
	return scanToken(tx.q.queryRow(ctx, `SELECT `+tokenCols+` FROM personal_access_tokens WHERE token_hash = ?`, hash))
}

// Tokens lists a user's tokens.
func (a *AccountTx) Tokens(ctx context.Context, user account.UserID) ([]account.Token, error) {
	return queryAll(ctx, a.q(), scanToken, `SELECT `+tokenCols+` FROM personal_access_tokens WHERE account_id = ? AND user_id = ? ORDER BY created_at, id`, string(a.id), string(user))
}

// AllTokens lists every token of the account (for export).
func (a *AccountTx) AllTokens(ctx context.Context) ([]account.Token, error) {
	return queryAll(ctx, a.q(), scanToken, `SELECT `+tokenCols+` FROM personal_access_tokens WHERE account_id = ? ORDER BY created_at, id`, string(a.id))
}

// Token finds one of a user's tokens.
func (a *AccountTx) Token(ctx context.Context, user account.UserID, id account.TokenID) (account.Token, error) {
	return scanToken(a.q().queryRow(ctx, `SELECT `+tokenCols+` FROM personal_access_tokens WHERE id = ? AND user_id = ? AND account_id = ?`, string(id), string(user), string(a.id)))
}

// InsertToken adds a token.
func (a *AccountTx) InsertToken(ctx context.Context, t account.Token) error {
	if err := a.owns("token", t.AccountID); err != nil {
		return err
	}
	_, err := a.q().exec(ctx, `INSERT INTO personal_access_tokens (`+tokenCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		string(t.ID), string(t.AccountID), string(t.UserID), t.Name, t.Hash, nanos(t.ExpiresAt), string(t.CreatedBy), nanos(t.CreatedAt), nanos(t.LastUsed))
	return mapErr(err)
}

// TouchToken records a token's use.
func (a *AccountTx) TouchToken(ctx context.Context, id account.TokenID, at int64) error {
	n, err := a.q().exec(ctx, `UPDATE personal_access_tokens SET last_used = ? WHERE id = ? AND account_id = ?`, at, string(id), string(a.id))
	return affected(n, err)
}

// DeleteToken removes one of a user's tokens.
func (a *AccountTx) DeleteToken(ctx context.Context, user account.UserID, id account.TokenID) error {
	n, err := a.q().exec(ctx, `DELETE FROM personal_access_tokens WHERE id = ? AND user_id = ? AND account_id = ?`, string(id), string(user), string(a.id))
	return affected(n, err)
}

// --- invitations ---

const inviteCols = `id, account_id, email, name, role, auto_groups, token_hash, expires_at, created_by, created_at`

func scanInvite(sc scanner) (account.Invite, error) {
	var (
		v                         account.Invite
		id, acc, role, groups, by string
		exp, created              int64
	)
	if err := sc.Scan(&id, &acc, &v.Email, &v.Name, &role, &groups, &v.Hash, &exp, &by, &created); err != nil {
		return v, mapErr(err)
	}
	if err := json.Unmarshal([]byte(groups), &v.AutoGroups); err != nil {
		return v, fmt.Errorf("invite %s: bad auto groups: %w", id, err)
	}
	v.ID, v.AccountID, v.Role, v.CreatedBy = account.InviteID(id), account.ID(acc), account.Role(role), account.UserID(by)
	v.ExpiresAt, v.CreatedAt = fromNanos(exp), fromNanos(created)
	return v, nil
}

// InviteByHash finds an invitation by the hash of its token, in whatever
// account it belongs to: the invited person has no account yet.
func (tx *Tx) InviteByHash(ctx context.Context, hash string) (account.Invite, error) {
	return scanInvite(tx.q.queryRow(ctx, `SELECT `+inviteCols+` FROM invites WHERE token_hash = ?`, hash))
}

// Invites lists the account's invitations.
func (a *AccountTx) Invites(ctx context.Context) ([]account.Invite, error) {
	return queryAll(ctx, a.q(), scanInvite, `SELECT `+inviteCols+` FROM invites WHERE account_id = ? ORDER BY created_at, id`, string(a.id))
}

// Invite finds one of the account's invitations.
func (a *AccountTx) Invite(ctx context.Context, id account.InviteID) (account.Invite, error) {
	return scanInvite(a.q().queryRow(ctx, `SELECT `+inviteCols+` FROM invites WHERE id = ? AND account_id = ?`, string(id), string(a.id)))
}

// PutInvite inserts or replaces an invitation; another invitation for the
// same e-mail address is ErrConflict.
func (a *AccountTx) PutInvite(ctx context.Context, v account.Invite) error {
	if err := a.owns("invite", v.AccountID); err != nil {
		return err
	}
	groups, err := jsonList(v.AutoGroups)
	if err != nil {
		return err
	}
	if _, err := a.q().exec(ctx, `DELETE FROM invites WHERE id = ? AND account_id = ?`, string(v.ID), string(a.id)); err != nil {
		return mapErr(err)
	}
	_, err = a.q().exec(ctx, `INSERT INTO invites (`+inviteCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		string(v.ID), string(v.AccountID), v.Email, v.Name, string(v.Role), groups, v.Hash, nanos(v.ExpiresAt), string(v.CreatedBy), nanos(v.CreatedAt))
	return mapErr(err)
}

// DeleteInvite removes an invitation.
func (a *AccountTx) DeleteInvite(ctx context.Context, id account.InviteID) error {
	n, err := a.q().exec(ctx, `DELETE FROM invites WHERE id = ? AND account_id = ?`, string(id), string(a.id))
	return affected(n, err)
}

// --- the built-in identity provider's credentials ---

const credentialCols = `subject, email, name, password_hash, created_at`

func scanCredential(sc scanner) (account.Credential, error) {
	var (
		c       account.Credential
		sub     string
		created int64
	)
	if err := sc.Scan(&sub, &c.Email, &c.Name, &c.PasswordHash, &created); err != nil {
		return c, mapErr(err)
	}
	c.Subject, c.CreatedAt = account.UserID(sub), fromNanos(created)
	return c, nil
}

// CredentialByEmail finds a local login by e-mail address (case-insensitive).
func (tx *Tx) CredentialByEmail(ctx context.Context, email string) (account.Credential, error) {
	return scanCredential(tx.q.queryRow(ctx, `SELECT `+credentialCols+` FROM local_credentials WHERE LOWER(email) = LOWER(?)`, email))
}

// Credential finds a local login by subject.
func (tx *Tx) Credential(ctx context.Context, subject account.UserID) (account.Credential, error) {
	return scanCredential(tx.q.queryRow(ctx, `SELECT `+credentialCols+` FROM local_credentials WHERE subject = ?`, string(subject)))
}

// InsertCredential adds a local login; a subject or e-mail in use is ErrConflict.
func (tx *Tx) InsertCredential(ctx context.Context, c account.Credential) error {
	_, err := tx.q.exec(ctx, `INSERT INTO local_credentials (`+credentialCols+`) VALUES (?, ?, ?, ?, ?)`,
		string(c.Subject), c.Email, c.Name, c.PasswordHash, nanos(c.CreatedAt))
	return mapErr(err)
}

// SetPassword replaces a local login's password hash.
func (tx *Tx) SetPassword(ctx context.Context, subject account.UserID, hash string) error {
	n, err := tx.q.exec(ctx, `UPDATE local_credentials SET password_hash = ? WHERE subject = ?`, hash, string(subject))
	return affected(n, err)
}

// DeleteCredential removes a local login.
func (tx *Tx) DeleteCredential(ctx context.Context, subject account.UserID) error {
	// The login's second factor goes with it.
	if err := tx.DeleteTOTPFactor(ctx, string(subject)); err != nil {
		return err
	}
	n, err := tx.q.exec(ctx, `DELETE FROM local_credentials WHERE subject = ?`, string(subject))
	return affected(n, err)
}

// UpdateSettings replaces the account's settings.
func (a *AccountTx) UpdateSettings(ctx context.Context, s account.Settings) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `UPDATE accounts SET settings = ? WHERE id = ?`, string(b), string(a.id))
	return affected(n, err)
}

// AccountByUserDomain finds the account whose users come from an e-mail
// domain (multi-account mode), claimed or not: for domains the operator
// lists.
func (tx *Tx) AccountByUserDomain(ctx context.Context, domain string) (account.ID, error) {
	var id string
	err := tx.q.queryRow(ctx, `SELECT id FROM accounts WHERE user_domain = ? AND user_domain <> '' ORDER BY created_at LIMIT 1`, domain).Scan(&id)
	return account.ID(id), mapErr(err)
}

// SetUserDomain records the e-mail domain whose new users join the account.
func (a *AccountTx) SetUserDomain(ctx context.Context, domain string) error {
	n, err := a.q().exec(ctx, `UPDATE accounts SET user_domain = ? WHERE id = ?`, domain, string(a.id))
	return affected(n, err)
}

// LoginsBetween lists, across accounts, the peers added by users whose
// login can expire and whose last login lies in (after, before] (unix
// nanoseconds): the expiry sweeper's candidates, a narrow window each time.
func (tx *Tx) LoginsBetween(ctx context.Context, after, before int64) ([]account.Peer, error) {
	return queryAll(ctx, tx.q, scanPeer, `SELECT `+peerCols+` FROM peers WHERE user_id <> '' AND login_expiration_enabled AND last_login > ? AND last_login <= ?`, after, before)
}

// BlockedUsers lists the IDs of the account's blocked users.
func (a *AccountTx) BlockedUsers(ctx context.Context) (map[account.UserID]bool, error) {
	ids, err := queryAll(ctx, a.q(), func(sc scanner) (string, error) {
		var id string
		return id, mapErr(sc.Scan(&id))
	}, `SELECT id FROM users WHERE account_id = ? AND blocked`, string(a.id))
	if err != nil {
		return nil, err
	}
	out := make(map[account.UserID]bool, len(ids))
	for _, id := range ids {
		out[account.UserID(id)] = true
	}
	return out, nil
}

// UpdatePeerName changes a peer's name, DNS label, login expiration and SSH
// switch (the fields PUT /api/peers/{id} sets).
func (a *AccountTx) UpdatePeerName(ctx context.Context, p account.Peer) error {
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `UPDATE peers SET name = ?, dns_label = ?, login_expiration_enabled = ?, ssh_enabled = ? WHERE id = ? AND account_id = ?`,
		p.Name, p.DNSLabel, p.LoginExpirationEnabled, p.SSHEnabled, string(p.ID), string(a.id))
	return affected(n, err)
}

// UpdateSetupKeyGroups replaces a setup key's auto-groups.
func (a *AccountTx) UpdateSetupKeyGroups(ctx context.Context, id account.SetupKeyID, groups []string) error {
	g, err := jsonList(groups)
	if err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `UPDATE setup_keys SET auto_groups = ? WHERE id = ? AND account_id = ?`, g, string(id), string(a.id))
	return affected(n, err)
}

// DeleteSetupKey removes a setup key (its peers stay).
func (a *AccountTx) DeleteSetupKey(ctx context.Context, id account.SetupKeyID) error {
	n, err := a.q().exec(ctx, `DELETE FROM setup_keys WHERE id = ? AND account_id = ?`, string(id), string(a.id))
	return affected(n, err)
}

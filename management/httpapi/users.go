package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/wiremesh/wiremesh/internal/clientip"
	"github.com/wiremesh/wiremesh/internal/ratelimit"
	"github.com/wiremesh/wiremesh/internal/version"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/releasecheck"
	"github.com/wiremesh/wiremesh/management/users"
)

// userJSON is the API's User object.
type userJSON struct {
	ID              string       `json:"id"`
	Email           string       `json:"email"`
	Name            string       `json:"name"`
	Role            string       `json:"role"`
	Status          string       `json:"status"`
	AutoGroups      []string     `json:"auto_groups"`
	IsBlocked       bool         `json:"is_blocked"`
	PendingApproval bool         `json:"pending_approval"`
	IsCurrent       bool         `json:"is_current"`
	IsServiceUser   bool         `json:"is_service_user"`
	LastLogin       string       `json:"last_login"`
	Issued          string       `json:"issued"`
	Password        string       `json:"password,omitempty"`
	Permissions     *permissions `json:"permissions,omitempty"`
}

func toUser(u account.User, caller account.User) userJSON {
	status := "active"
	if u.Blocked || u.PendingApproval {
		status = "blocked"
	}
	groups := u.AutoGroups
	if groups == nil {
		groups = []string{}
	}
	issued := u.Issued
	if issued == "jwt" {
		issued = "integration"
	}
	return userJSON{ID: string(u.ID), Email: u.Email, Name: u.Name, Role: string(u.Role), Status: status, AutoGroups: groups,
		IsBlocked: u.Blocked || u.PendingApproval, PendingApproval: u.PendingApproval, IsCurrent: u.ID == caller.ID, IsServiceUser: u.ServiceUser, LastLogin: ts(u.LastLogin), Issued: issued}
}

func (a *API) instance(w http.ResponseWriter, r *http.Request) error {
	need, err := a.o.Users.SetupRequired(r.Context())
	if err != nil {
		return err
	}
	return ok(w, map[string]bool{"setup_required": need})
}

func (a *API) setup(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Email       string `json:"email"`
		Password    string `json:"password"`
		Name        string `json:"name"`
		CreatePAT   bool   `json:"create_pat"`
		PATExpireIn int    `json:"pat_expire_in"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	u, pat, err := a.o.Users.Setup(r.Context(), users.SetupInput{Email: req.Email, Password: req.Password, Name: req.Name, CreatePAT: req.CreatePAT, PATDays: req.PATExpireIn})
	if err != nil {
		return err
	}
	resp := map[string]string{"user_id": string(u.ID), "email": u.Email}
	if pat != "" {
		resp["personal_access_token"] = pat
	}
	return ok(w, resp)
}

func (a *API) listUsers(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var filter *bool
	if v := r.URL.Query().Get("service_user"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errBadQuery("service_user", v)
		}
		filter = &b
	}
	us, err := a.o.Users.List(r.Context(), caller, filter)
	if err != nil {
		return err
	}
	out := make([]userJSON, 0, len(us))
	for _, u := range us {
		out = append(out, toUser(u, caller))
	}
	return ok(w, out)
}

func (a *API) currentUser(w http.ResponseWriter, r *http.Request, caller account.User) error {
	acc, err := a.callerAccount(r.Context(), caller)
	if err != nil {
		return err
	}
	u := toUser(caller, caller)
	u.Permissions = a.permissionsOf(caller, acc.Settings)
	return ok(w, u)
}

func (a *API) getUser(w http.ResponseWriter, r *http.Request, caller account.User) error {
	u, err := a.o.Users.Get(r.Context(), caller, account.UserID(r.PathValue("userId")))
	if err != nil {
		return err
	}
	return ok(w, toUser(u, caller))
}

func (a *API) createUser(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var req struct {
		Email         string   `json:"email"`
		Name          string   `json:"name"`
		Role          string   `json:"role"`
		AutoGroups    []string `json:"auto_groups"`
		IsServiceUser bool     `json:"is_service_user"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	u, pw, err := a.o.Users.Create(r.Context(), caller, users.CreateInput{Email: req.Email, Name: req.Name, Role: account.Role(req.Role),
		AutoGroups: req.AutoGroups, ServiceUser: req.IsServiceUser})
	if err != nil {
		return err
	}
	out := toUser(u, caller)
	out.Password = pw
	return ok(w, out)
}

func (a *API) updateUser(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var req struct {
		Role       string   `json:"role"`
		AutoGroups []string `json:"auto_groups"`
		IsBlocked  bool     `json:"is_blocked"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	u, err := a.o.Users.Update(r.Context(), caller, account.UserID(r.PathValue("userId")), users.UpdateInput{Role: account.Role(req.Role),
		AutoGroups: req.AutoGroups, Blocked: req.IsBlocked})
	if err != nil {
		return err
	}
	return ok(w, toUser(u, caller))
}

func (a *API) deleteUser(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := a.o.Users.Delete(r.Context(), caller, account.UserID(r.PathValue("userId"))); err != nil {
		return err
	}
	return ok(w, struct{}{})
}

func (a *API) changePassword(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var req struct {
		Old string `json:"old_password"`
		New string `json:"new_password"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := a.o.Users.ChangePassword(r.Context(), caller, account.UserID(r.PathValue("userId")), req.Old, req.New); err != nil {
		return err
	}
	return ok(w, struct{}{})
}

// --- personal access tokens ---

type tokenJSON struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	ExpirationDate string `json:"expiration_date"`
	CreatedBy      string `json:"created_by"`
	CreatedAt      string `json:"created_at"`
	LastUsed       string `json:"last_used"`
}

func toToken(t account.Token) tokenJSON {
	return tokenJSON{ID: string(t.ID), Name: t.Name, ExpirationDate: ts(t.ExpiresAt), CreatedBy: string(t.CreatedBy), CreatedAt: ts(t.CreatedAt), LastUsed: ts(t.LastUsed)}
}

func (a *API) listTokens(w http.ResponseWriter, r *http.Request, caller account.User) error {
	ts, err := a.o.Users.Tokens(r.Context(), caller, account.UserID(r.PathValue("userId")))
	if err != nil {
		return err
	}
	out := make([]tokenJSON, 0, len(ts))
	for _, t := range ts {
		out = append(out, toToken(t))
	}
	return ok(w, out)
}

func (a *API) getToken(w http.ResponseWriter, r *http.Request, caller account.User) error {
	t, err := a.o.Users.Token(r.Context(), caller, account.UserID(r.PathValue("userId")), account.TokenID(r.PathValue("tokenId")))
	if err != nil {
		return err
	}
	return ok(w, toToken(t))
}

func (a *API) createToken(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var req struct {
		Name      string `json:"name"`
		ExpiresIn int    `json:"expires_in"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	t, plain, err := a.o.Users.CreateToken(r.Context(), caller, account.UserID(r.PathValue("userId")), req.Name, req.ExpiresIn)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return ok(w, map[string]any{"plain_token": plain, "personal_access_token": toToken(t)})
}

func (a *API) deleteToken(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := a.o.Users.DeleteToken(r.Context(), caller, account.UserID(r.PathValue("userId")), account.TokenID(r.PathValue("tokenId"))); err != nil {
		return err
	}
	return ok(w, struct{}{})
}

// --- invitations ---

type inviteJSON struct {
	ID          string   `json:"id"`
	Email       string   `json:"email"`
	Name        string   `json:"name"`
	Role        string   `json:"role"`
	AutoGroups  []string `json:"auto_groups"`
	ExpiresAt   string   `json:"expires_at"`
	CreatedAt   string   `json:"created_at"`
	Expired     bool     `json:"expired"`
	InviteToken string   `json:"invite_token,omitempty"`
}

func toInvite(v account.Invite, token string) inviteJSON {
	g := v.AutoGroups
	if g == nil {
		g = []string{}
	}
	return inviteJSON{ID: string(v.ID), Email: v.Email, Name: v.Name, Role: string(v.Role), AutoGroups: g, ExpiresAt: ts(v.ExpiresAt),
		CreatedAt: ts(v.CreatedAt), Expired: time.Now().After(v.ExpiresAt), InviteToken: token}
}

func (a *API) listInvites(w http.ResponseWriter, r *http.Request, caller account.User) error {
	vs, err := a.o.Users.Invites(r.Context(), caller)
	if err != nil {
		return err
	}
	out := make([]inviteJSON, 0, len(vs))
	for _, v := range vs {
		out = append(out, toInvite(v, ""))
	}
	return ok(w, out)
}

func (a *API) createInvite(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var req struct {
		Email      string   `json:"email"`
		Name       string   `json:"name"`
		Role       string   `json:"role"`
		AutoGroups []string `json:"auto_groups"`
		ExpiresIn  int      `json:"expires_in"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	ttl, err := inviteTTL(req.ExpiresIn)
	if err != nil {
		return err
	}
	v, token, err := a.o.Users.CreateInvite(r.Context(), caller, users.InviteInput{Email: req.Email, Name: req.Name, Role: account.Role(req.Role),
		AutoGroups: req.AutoGroups, ExpiresIn: ttl})
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return ok(w, toInvite(v, token))
}

func (a *API) deleteInvite(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := a.o.Users.DeleteInvite(r.Context(), caller, account.InviteID(r.PathValue("inviteId"))); err != nil {
		return err
	}
	return ok(w, struct{}{})
}

func (a *API) regenerateInvite(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var req struct {
		ExpiresIn int `json:"expires_in"`
	}
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			return err
		}
	}
	ttl, err := inviteTTL(req.ExpiresIn)
	if err != nil {
		return err
	}
	v, token, err := a.o.Users.RegenerateInvite(r.Context(), caller, account.InviteID(r.PathValue("inviteId")), ttl)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return ok(w, map[string]string{"invite_token": token, "invite_expires_at": ts(v.ExpiresAt)})
}

// guardInvite runs a public call authenticated by an invitation token
// alone. Unknown tokens are limited per source, as setup keys are: the
// limit is not what keeps a 256-bit token secret and a lookup costs
// little, so a valid token is never refused, whoever shares its source;
// past the limit an unknown one gets 429 instead of 404.
func (a *API) guardInvite(r *http.Request, call func() error) error {
	src := clientip.Resolver{Trusted: a.o.TrustedProxies}.FromRequest(r)
	res, rerr := a.inviteGuard.Reserve(ratelimit.Key{Src: src, Subject: "invite-token"})
	err := call()
	switch {
	case rerr != nil && errors.Is(err, users.ErrNotFound):
		return fmt.Errorf("%w: too many unknown invitation tokens from this address; wait a minute and check the link", errTooManyTokens)
	case rerr != nil:
	case errors.Is(err, users.ErrNotFound):
		res.Fail()
	default:
		res.Success()
	}
	return err
}

func (a *API) inviteInfo(w http.ResponseWriter, r *http.Request) error {
	var info users.InviteInfo
	err := a.guardInvite(r, func() error {
		var err error
		info, err = a.o.Users.LookupInvite(r.Context(), r.PathValue("inviteId"))
		return err
	})
	if err != nil {
		return err
	}
	return ok(w, map[string]any{"email": info.Invite.Email, "name": info.Invite.Name, "expires_at": ts(info.Invite.ExpiresAt),
		"valid": info.Valid, "invited_by": info.InvitedBy})
}

func (a *API) acceptInvite(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Password string `json:"password"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	err := a.guardInvite(r, func() error {
		_, err := a.o.Users.AcceptInvite(r.Context(), r.PathValue("token"), req.Password)
		return err
	})
	if err != nil {
		return err
	}
	return ok(w, map[string]bool{"success": true})
}

// inviteTTL converts expires_in seconds, bounded before the multiplication
// so that no value wraps around.
func inviteTTL(secs int) (time.Duration, error) {
	if secs < 0 || int64(secs) > int64(users.MaxInviteTTL/time.Second) {
		return 0, fmt.Errorf("%w: expires_in must be 0 (the default) to %d seconds", users.ErrInvalid, int64(users.MaxInviteTTL/time.Second))
	}
	return time.Duration(secs) * time.Second, nil
}

// --- approval, invitations by the identity provider, version ---

func (a *API) approveUser(w http.ResponseWriter, r *http.Request, caller account.User) error {
	u, err := a.o.Users.Approve(r.Context(), caller, account.UserID(r.PathValue("userId")))
	if err != nil {
		return err
	}
	return ok(w, toUser(u, caller))
}

func (a *API) rejectUser(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := a.o.Users.Reject(r.Context(), caller, account.UserID(r.PathValue("userId"))); err != nil {
		return err
	}
	return ok(w, struct{}{})
}

func (a *API) resendInvite(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := a.o.Users.ResendInvite(r.Context(), caller, account.UserID(r.PathValue("userId"))); err != nil {
		return err
	}
	return ok(w, struct{}{})
}

// instanceVersionInfo is InstanceVersionInfo. The available versions and
// management_update_available are left out while they are unknown: the
// release check is off (--version-check-url), its last fetch failed, or
// this build's version is not a semantic version. Never a false "no
// update".
type instanceVersionInfo struct {
	Current         string `json:"management_current_version"`
	UpdateAvailable *bool  `json:"management_update_available,omitempty"`
	Management      string `json:"management_available_version,omitempty"`
	Dashboard       string `json:"dashboard_available_version,omitempty"`
}

// instanceVersion reports this server's version and, when the release
// check knows them, the latest released versions.
func (a *API) instanceVersion(w http.ResponseWriter, r *http.Request, _ account.User) error {
	out := instanceVersionInfo{Current: version.Version}
	latest, err := a.o.Releases.Latest(r.Context())
	if err != nil {
		return ok(w, out)
	}
	out.Management, out.Dashboard = latest.Management, latest.Dashboard
	if latest.Management != "" {
		if newer, known := releasecheck.Newer(version.Version, latest.Management); known {
			out.UpdateAvailable = &newer
		}
	}
	return ok(w, out)
}

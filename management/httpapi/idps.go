package httpapi

import (
	"fmt"
	"net/http"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/idp"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/users"
)

// idpJSON is the API's IdentityProvider object: the client secret is
// stored, never returned.
type idpJSON struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Name     string `json:"name"`
	Issuer   string `json:"issuer"`
	ClientID string `json:"client_id"`
}

func toIdP(p store.IdentityProvider) idpJSON {
	return idpJSON{ID: p.ID, Type: p.Type, Name: p.Name, Issuer: p.Issuer, ClientID: p.ClientID}
}

func (a *API) idpRoutes(authed func(string, handler)) {
	authed("GET /api/identity-providers", a.listIdPs)
	authed("POST /api/identity-providers", a.createIdP)
	authed("GET /api/identity-providers/{idpId}", a.getIdP)
	authed("PUT /api/identity-providers/{idpId}", a.updateIdP)
	authed("DELETE /api/identity-providers/{idpId}", a.deleteIdP)
}

func (a *API) idps() (*idp.Providers, error) {
	if a.o.IdPs == nil {
		// Upstream providers plug into the built-in provider's login
		// page: without it there is nowhere to add them.
		return nil, fmt.Errorf("%w: identity providers are added to its login page", users.ErrNoLocalIdP)
	}
	return a.o.IdPs, nil
}

func (a *API) listIdPs(w http.ResponseWriter, r *http.Request, caller account.User) error {
	ps, err := a.idps()
	if err != nil {
		return err
	}
	list, err := ps.List(r.Context(), caller)
	if err != nil {
		return err
	}
	out := make([]idpJSON, 0, len(list))
	for _, p := range list {
		out = append(out, toIdP(p))
	}
	return ok(w, out)
}

func (a *API) getIdP(w http.ResponseWriter, r *http.Request, caller account.User) error {
	ps, err := a.idps()
	if err != nil {
		return err
	}
	p, err := ps.Get(r.Context(), caller, r.PathValue("idpId"))
	if err != nil {
		return err
	}
	return ok(w, toIdP(p))
}

// idpRequest is the IdentityProviderRequest object.
type idpRequest struct {
	Type         *string `json:"type"`
	Name         *string `json:"name"`
	Issuer       *string `json:"issuer"`
	ClientID     *string `json:"client_id"`
	ClientSecret string  `json:"client_secret"`
}

func readIdP(r *http.Request) (idp.ProviderInput, error) {
	var req idpRequest
	if err := decode(r, &req); err != nil {
		return idp.ProviderInput{}, err
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"type", req.Type}, {"name", req.Name}, {"issuer", req.Issuer}, {"client_id", req.ClientID}} {
		if f.v == nil {
			return idp.ProviderInput{}, fmt.Errorf("%w: %s is required", idp.ErrInvalid, f.name)
		}
	}
	return idp.ProviderInput{Type: *req.Type, Name: *req.Name, Issuer: *req.Issuer, ClientID: *req.ClientID, ClientSecret: req.ClientSecret}, nil
}

func (a *API) createIdP(w http.ResponseWriter, r *http.Request, caller account.User) error {
	return a.saveIdP(w, r, func(ps *idp.Providers, in idp.ProviderInput) (store.IdentityProvider, error) {
		return ps.Create(r.Context(), caller, in)
	})
}

func (a *API) updateIdP(w http.ResponseWriter, r *http.Request, caller account.User) error {
	return a.saveIdP(w, r, func(ps *idp.Providers, in idp.ProviderInput) (store.IdentityProvider, error) {
		return ps.Update(r.Context(), caller, r.PathValue("idpId"), in)
	})
}

// saveIdP reads an IdentityProviderRequest, hands it to save and
// answers with the provider saved.
func (a *API) saveIdP(w http.ResponseWriter, r *http.Request, save func(*idp.Providers, idp.ProviderInput) (store.IdentityProvider, error)) error {
	ps, err := a.idps()
	if err != nil {
		return err
	}
	in, err := readIdP(r)
	if err != nil {
		return err
	}
	p, err := save(ps, in)
	if err != nil {
		return err
	}
	return ok(w, toIdP(p))
}

func (a *API) deleteIdP(w http.ResponseWriter, r *http.Request, caller account.User) error {
	ps, err := a.idps()
	if err != nil {
		return err
	}
	if err := ps.Delete(r.Context(), caller, r.PathValue("idpId")); err != nil {
		return err
	}
	return ok(w, struct{}{})
}

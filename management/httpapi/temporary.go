package httpapi

import (
	"fmt"
	"net/http"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/peers"
)

// createTemporaryAccess serves POST /api/peers/{peerId}/temporary-access:
// a temporary peer (the dashboard's in-browser SSH/RDP client) that may
// reach only the target peer on the rules given. Package peers owns its
// lifecycle; this only translates.
func (a *API) createTemporaryAccess(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var req struct {
		Name     *string  `json:"name"`
		WgPubKey *string  `json:"wg_pub_key"`
		Rules    []string `json:"rules"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	switch {
	case req.Name == nil:
		return fmt.Errorf("%w: name is required", errBadRequest)
	case req.WgPubKey == nil:
		return fmt.Errorf("%w: wg_pub_key is required", errBadRequest)
	case req.Rules == nil:
		return fmt.Errorf("%w: rules is required", errBadRequest)
	}
	target := account.PeerID(r.PathValue("peerId"))
	if _, _, err := a.peer(r.Context(), caller, target); err != nil {
		return err
	}
	p, err := a.o.Peers.CreateTemporary(r.Context(), caller.AccountID, target, peers.TemporaryInput{Name: *req.Name, Key: *req.WgPubKey, Rules: req.Rules}, caller.ID)
	if err != nil {
		return err
	}
	return ok(w, struct {
		Name  string   `json:"name"`
		ID    string   `json:"id"`
		Rules []string `json:"rules"`
	}{Name: p.Name, ID: string(p.ID), Rules: req.Rules})
}

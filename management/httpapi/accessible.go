package httpapi

import (
	"net/http"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/users"
)

// accessiblePeerJSON is the API's AccessiblePeer.
type accessiblePeerJSON struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	IP          string `json:"ip"`
	DNSLabel    string `json:"dns_label"`
	UserID      string `json:"user_id"`
	OS          string `json:"os"`
	CountryCode string `json:"country_code"`
	CityName    string `json:"city_name"`
	GeonameID   int    `json:"geoname_id"`
	Connected   bool   `json:"connected"`
	LastSeen    string `json:"last_seen"`
}

// accessiblePeers lists the peers a peer the caller may see reaches under
// the account's policies now: exactly the peers of its network map (none
// while it is pending approval, its user blocked or its login expired).
func (a *API) accessiblePeers(w http.ResponseWriter, r *http.Request, caller account.User) error {
	id := account.PeerID(r.PathValue("peerId"))
	var (
		acc    account.Account
		ps     []account.Peer
		access networkmap.Access
	)
	ctx := r.Context()
	err := a.o.Store.Read(ctx, func(tx *store.Tx) error {
		// The one peer, not every peer the caller may see: a regular user
		// asks only about its own.
		at := tx.In(caller.AccountID)
		p, err := at.Peer(ctx, id)
		if err != nil {
			return err
		}
		if !seesAll(caller, auth.Peers) && p.UserID != caller.ID {
			return users.ErrNotFound
		}
		acc, ps, access, err = networkmap.Read(ctx, at, time.Now())
		return err
	})
	if err != nil {
		return err
	}
	out := []accessiblePeerJSON{}
	m, found := networkmap.Compute(acc, ps, access, id)
	if !found {
		return ok(w, out)
	}
	for _, p := range m.Peers {
		os := p.Meta.OS
		if p.Meta.OSVersion != "" {
			os += " " + p.Meta.OSVersion
		}
		out = append(out, accessiblePeerJSON{ID: string(p.ID), Name: p.Name, IP: p.IP.String(), DNSLabel: p.FQDN(acc.Domain), UserID: string(p.UserID),
			OS: os, Connected: p.Connected, LastSeen: ts(p.LastSeen)})
	}
	return ok(w, out)
}

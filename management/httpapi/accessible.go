package httpapi

import (
	"net/http"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/users"
)

// accessiblePeerJSON is the API's AccessiblePeer.
type accessiblePeerJSON struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	IP          string `json:"ip"`
	IPv6        string `json:"ipv6,omitempty"` // none: the peer has no IPv6 overlay address
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
// Which peers those are comes from the maps prepared at the account's
// serial (reachCache); what it shows of them is read fresh.
func (a *API) accessiblePeers(w http.ResponseWriter, r *http.Request, caller account.User) error {
	id := account.PeerID(r.PathValue("peerId"))
	var (
		acc   account.Account
		ids   []account.PeerID
		fresh map[account.PeerID]account.Peer
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
		if acc, err = at.Account(ctx); err != nil {
			return err
		}
		e, err := a.reachAt(ctx, at, reachSource{acc: acc}, time.Now())
		if err != nil {
			return err
		}
		reach, _ := e.ix.Reachable(id)
		for _, p := range reach {
			ids = append(ids, p.ID)
		}
		ps, err := at.PeersByID(ctx, ids)
		fresh = make(map[account.PeerID]account.Peer, len(ps))
		for _, p := range ps {
			fresh[p.ID] = p
		}
		return err
	})
	if err != nil {
		return err
	}
	out := []accessiblePeerJSON{}
	for _, pid := range ids {
		p, ok := fresh[pid]
		if !ok {
			continue // deleted since the maps were prepared
		}
		os := p.Meta.OS
		if p.Meta.OSVersion != "" {
			os += " " + p.Meta.OSVersion
		}
		out = append(out, accessiblePeerJSON{ID: string(p.ID), Name: p.Name, IP: p.IP.String(), IPv6: ipv6Text(p.IPv6), DNSLabel: p.FQDN(acc.Domain), UserID: string(p.UserID),
			OS: os, Connected: p.Connected, LastSeen: ts(p.LastSeen)})
	}
	return ok(w, out)
}

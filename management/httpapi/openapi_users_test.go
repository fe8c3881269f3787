package httpapi_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/version"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/updates"
)

// neverOK are operations of openapi.json this server never answers with
// 2xx here, driven to their error instead: invitations are not sent from
// here (412), and the rig's account is the install's own, which is never
// deleted over the API (412; a deletion is tested in management/server).
var neverOK = map[string]bool{"POST /api/users/{userId}/invite": true, "DELETE /api/accounts/{accountId}": true}

// conformUsers drives user approval, the resent invitation, the version
// and a peer's accessible peers against the document.
func conformUsers(t *testing.T, d *docRig, ownerID string) {
	t.Helper()
	ctx := context.Background()
	// The release check is off: whether an update exists is unknown, so
	// neither it nor the available versions are reported.
	if v := obj(d.call("GET", "/api/instance/version", "/api/instance/version", nil, 200)); v["management_current_version"] != version.Version || len(v) != 1 {
		t.Errorf("version with the release check off: %v", v)
	}
	pending := func(id string) {
		t.Helper()
		err := d.st.Tx(ctx, func(tx *store.Tx) error {
			o, err := tx.UserByID(ctx, account.UserID(ownerID))
			if err != nil {
				return err
			}
			return tx.In(o.AccountID).InsertUser(ctx, account.User{ID: account.UserID(id), AccountID: o.AccountID, Email: id + "@example.com", Name: id,
				Role: account.RoleUser, AutoGroups: []string{}, Issued: "jwt", CreatedAt: time.Now(), PendingApproval: true})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	pending("waiting|1")
	pending("waiting|2")
	if u := obj(d.call("POST", "/api/users/{userId}/approve", "/api/users/"+url.PathEscape("waiting|1")+"/approve", nil, 200)); u["pending_approval"] != false {
		t.Errorf("approved user %v", u)
	}
	d.call("DELETE", "/api/users/{userId}/reject", "/api/users/"+url.PathEscape("waiting|2")+"/reject", nil, 200)
	d.call("POST", "/api/users/{userId}/invite", "/api/users/"+url.PathEscape("waiting|1")+"/invite", nil, 412)

	sk := d.call("POST", "/api/setup-keys", "/api/setup-keys", map[string]any{"name": "reach", "type": "reusable", "expires_in": 3600, "auto_groups": []string{}}, 200)
	var ids []string
	for _, host := range []string{"a", "b"} {
		priv, err := key.NewPrivate()
		if err != nil {
			t.Fatal(err)
		}
		p, _, err := peers.New(d.st, updates.NewHub(), nil, nil).Login(ctx, peers.LoginInput{Key: priv.Public(), SetupKey: str(sk, "key"),
			Meta: account.Meta{Hostname: host, OS: "linux"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, string(p.ID))
	}
	// The default All-to-All policy: each reaches the other.
	if l := list(d.call("GET", "/api/peers/{peerId}/accessible-peers", "/api/peers/"+ids[0]+"/accessible-peers", nil, 200)); len(l) != 1 || str(l[0], "id") != ids[1] {
		t.Errorf("accessible peers of %s: %v, want %s", ids[0], l, ids[1])
	}
}

package httpapi_test

import (
	"testing"

	"github.com/wiremesh/wiremesh/internal/key"
)

// conformTemporary drives temporary access against the document: a peer
// to reach (registered with a setup key), then a temporary peer for it.
func conformTemporary(t *testing.T, d *docRig) {
	t.Helper()
	peersNow := list(d.call("GET", "/api/peers", "/api/peers", nil, 200))
	if len(peersNow) == 0 {
		t.Fatal("no peer to give temporary access to")
	}
	target := str(peersNow[0], "id")
	priv, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"name": "browser-ssh", "wg_pub_key": priv.Public().String(), "rules": []string{"tcp/22", "tcp/3389-3390"}}
	got := obj(d.call("POST", "/api/peers/{peerId}/temporary-access", "/api/peers/"+target+"/temporary-access", body, 200))
	if got["name"] != "browser-ssh" || str(got, "id") == "" || len(got["rules"].([]any)) != 2 {
		t.Errorf("temporary access answer %v", got)
	}
	d.call("POST", "/api/peers/{peerId}/temporary-access", "/api/peers/"+target+"/temporary-access",
		map[string]any{"name": "x", "wg_pub_key": "nope", "rules": []string{"tcp/22"}}, 422)
}

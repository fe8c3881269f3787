package server_test

import (
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/management/storetest"
)

// TestSetupKeyExtraDNSLabelsRefused: allow_extra_dns_labels true is
// refused with 422 naming the field on create and update (the server does
// not publish extra DNS labels), nothing is stored; false is accepted.
func TestSetupKeyExtraDNSLabelsRefused(t *testing.T) {
	engines.Each(t, testSetupKeyExtraDNSLabelsRefused)
}

func testSetupKeyExtraDNSLabelsRefused(t *testing.T, eng storetest.Engine) {
	_, o := ownerAPI(t, eng)
	req := func(allow bool) map[string]any {
		return map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0,
			"allow_extra_dns_labels": allow}
	}
	before := len(list(o.call("GET", "/api/setup-keys", nil, 200)))
	e := obj(o.call("POST", "/api/setup-keys", req(true), 422))
	if msg, _ := e["message"].(string); !strings.Contains(msg, "allow_extra_dns_labels") {
		t.Errorf("422 message %q does not name allow_extra_dns_labels", msg)
	}
	if n := len(list(o.call("GET", "/api/setup-keys", nil, 200))); n != before {
		t.Fatalf("a refused key was stored: %d keys, had %d", n, before)
	}
	k := obj(o.call("POST", "/api/setup-keys", req(false), 200))
	if k["allow_extra_dns_labels"] != false {
		t.Errorf("created key %v", k)
	}
	id := k["id"].(string)
	e = obj(o.call("PUT", "/api/setup-keys/"+id, map[string]any{"revoked": true, "auto_groups": []string{}, "allow_extra_dns_labels": true}, 422))
	if msg, _ := e["message"].(string); !strings.Contains(msg, "allow_extra_dns_labels") {
		t.Errorf("422 message %q does not name allow_extra_dns_labels", msg)
	}
	if got := obj(o.call("GET", "/api/setup-keys/"+id, nil, 200)); got["revoked"] != false {
		t.Errorf("a refused update was stored: %v", got)
	}
	o.call("PUT", "/api/setup-keys/"+id, map[string]any{"revoked": false, "auto_groups": []string{}, "allow_extra_dns_labels": false}, 200)
}

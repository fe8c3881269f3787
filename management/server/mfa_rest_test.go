package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/wiremesh/wiremesh/internal/testoidc"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/storetest"
)

// TestLocalMFASetting: settings.local_mfa_enabled, set through the REST
// API, makes the built-in provider require a TOTP second factor of the
// account's users (a device approval is refused until the user has set one
// up at a browser login); turned off, a user who never enrolled logs in
// with the password alone again.
func TestLocalMFASetting(t *testing.T) { engines.Each(t, testLocalMFASetting) }

func testLocalMFASetting(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	acc := accountOf(o)
	id := acc["id"].(string)
	settings := obj(acc["settings"])

	approve := func() error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		f, err := testpeer.New(e.conn, "mfa").DeviceFlow(ctx)
		if err != nil {
			t.Fatalf("device flow: %v", err)
		}
		pc := f.GetProviderConfig()
		cfg := &oauth2.Config{ClientID: pc.GetClientID(), Scopes: strings.Fields(pc.GetScope()),
			Endpoint: oauth2.Endpoint{DeviceAuthURL: pc.GetDeviceAuthEndpoint(), TokenURL: pc.GetTokenEndpoint(), AuthStyle: oauth2.AuthStyleInParams}}
		da, err := cfg.DeviceAuth(ctx, oauth2.SetAuthURLParam("audience", pc.GetAudience()))
		if err != nil {
			t.Fatalf("device authorization: %v", err)
		}
		return testoidc.ApproveDevice(nil, da.VerificationURI, da.UserCode, "o@example.com", "Owner-passw0rd!")
	}
	if err := approve(); err != nil {
		t.Fatalf("password login without the setting: %v", err)
	}

	settings["local_mfa_enabled"] = true
	got := obj(obj(o.call("PUT", "/api/accounts/"+id, map[string]any{"settings": settings}, 200))["settings"])
	if got["local_mfa_enabled"] != true || obj(accountOf(o)["settings"])["local_mfa_enabled"] != true {
		t.Fatalf("local_mfa_enabled not stored: %v", got)
	}
	err := approve()
	// A device approval cannot enrol (it asks for a dashboard login first).
	if err == nil || !strings.Contains(err.Error(), "requires a second factor") {
		t.Fatalf("with local_mfa_enabled the password alone was enough: %v", err)
	}

	settings["local_mfa_enabled"] = false
	o.call("PUT", "/api/accounts/"+id, map[string]any{"settings": settings}, 200)
	if err := approve(); err != nil {
		t.Fatalf("password login after turning the setting off (never enrolled): %v", err)
	}
}

package turncreds

import (
	"testing"
	"time"
)

func TestCredentials(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	i := Issuer{Secret: "s3cret", TTL: time.Hour}
	u, p := i.Credentials(now)
	if u != "1700003600" {
		t.Fatalf("user %q", u)
	}
	// Known value: printf 1700003600 | openssl dgst -sha1 -hmac s3cret -binary | base64
	if p != "hkHv/K58ZdACCJ9F4MWT46M317I=" {
		t.Fatalf("password %q", p)
	}
	if !Valid("s3cret", u, p, now) || Valid("s3cret", u, p, now.Add(time.Hour)) || Valid("other", u, p, now) || Valid("s3cret", u+"0", p, now) {
		t.Fatal("validation")
	}
	if i.Refresh() != 45*time.Minute {
		t.Fatalf("refresh %v", i.Refresh())
	}
	if u, p := (Issuer{StaticUser: "a", StaticPass: "b"}).Credentials(now); u != "a" || p != "b" {
		t.Fatal("static")
	}
}

// TestCredentialsPerPeer: two peers get different credentials, each valid
// on its own, and one peer's password does not work with another's name.
func TestCredentialsPerPeer(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	i := Issuer{Secret: "s3cret", TTL: time.Hour}
	ua, pa := i.CredentialsFor(now, "peer-a")
	ub, pb := i.CredentialsFor(now, "peer:b/\n")
	if ua != "1700003600:peer-a" || ub != "1700003600:peerb" {
		t.Fatalf("user names %q %q", ua, ub)
	}
	if pa == pb || !Valid("s3cret", ua, pa, now) || !Valid("s3cret", ub, pb, now) {
		t.Fatalf("per-peer credentials %q/%q %q/%q", ua, pa, ub, pb)
	}
	if Valid("s3cret", ub, pa, now) || Valid("s3cret", ua, pa, now.Add(time.Hour)) {
		t.Fatal("a password served another name, or after expiry")
	}
}

// Package oidcop is an OpenID Connect provider built on zitadel/oidc/v3's
// certified pkg/op: discovery, JWKS, the authorization-code flow with PKCE,
// the device authorization flow (RFC 8628), userinfo and JWT access tokens
// signed with an RSA key the caller keeps. It renders its own login and
// device-approval pages and authenticates people against a Directory the
// caller provides: management's built-in provider uses the store's local
// credentials, tests use an in-memory directory to stand in for an external
// IdP. Pending logins and device codes live in memory (they last minutes),
// bounded in count and bytes per source address and overall, with every
// client-supplied field capped (Limits, limits.go); wrong passwords are
// limited per (source, e-mail) and per e-mail;
// access tokens are JWTs any process holding the public key can verify.
// With a RefreshStore (refresh.go) a login asking for offline_access also
// gets a refresh token, rotated on every use (reuse revokes its family),
// ended by logout (end_session), revocation and the store's owner. With
// Upstreams (upstream.go) the login page offers "Log in with <name>" for
// upstream OpenID Connect providers (code flow with PKCE, state, nonce and
// a browser-bound cookie; ID tokens verified with coreos/go-oidc), whose
// pending state is capped like the rest. With a SecondFactor (mfa.go)
// password logins and device approvals ask for a TOTP code, and enrol one
// when it is required.
// It does not decide accounts or roles: that is management's business.
package oidcop

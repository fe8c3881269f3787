// Package auth establishes who is calling management: it verifies OpenID
// Connect JWTs with coreos/go-oidc/v3 (issuer discovery, JWKS with key
// rotation, signature, issuer, audience and expiry with a clock-skew
// allowance) and makes and parses personal access tokens. It returns
// claims; placing a caller in an account and deciding what it may do
// belongs to package users.
package auth

// Package auth establishes who is calling management: it verifies OpenID
// Connect JWTs with coreos/go-oidc/v3 (issuer discovery, JWKS with key
// rotation, signature, issuer, audience and expiry with a clock-skew
// allowance) and makes and parses personal access tokens. It returns
// claims; placing a caller in an account belongs to package users. It
// also holds the role table (roles.go): which of the reference's roles
// (owner, admin, user, billing_admin, auditor, network_admin) may read,
// create, update or delete in which module, for every object of the
// account or only the caller's own; the REST boundary and package users
// consult it.
package auth

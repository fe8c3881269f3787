package sshserver

// UsersAllow exposes Users.allows to the external tests.
func UsersAllow(u *Users, id, local string) error { return u.allows(id, local) }

// Refusal bounds (auditlimit.go), for the external tests.
const (
	MaxAuditedRefusalsPerConn = maxAuditedRefusalsPerConn
	MaxRefusalsPerConn        = maxRefusalsPerConn
	RefusalBurst              = refusalBurst
	RefusalEvery              = refusalEvery
)

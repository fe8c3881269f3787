package httpapi_test

import "testing"

// conformExtra drives the operations added to openapi.json after the
// first walk of TestOpenAPIOperationsConform; it runs on the same server
// after that walk, as the owner (d.token).
func conformExtra(t *testing.T, d *docRig, ownerID string) {
	t.Helper()
	conformUsers(t, d, ownerID)
	conformTemporary(t, d)
	conformJobs(t, d)
	conformRouting(t, d)
	conformDNS(t, d)
	conformLive(t, d)
}

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// TestStatusPendingApproval: a peer management keeps pending says so in
// the text (plain and -d) and JSON outputs; an approved one does not.
func TestStatusPendingApproval(t *testing.T) {
	for _, pending := range []bool{true, false} {
		r := &daemonpb.StatusResponse{Status: "Connected", FullStatus: &daemonpb.FullStatus{
			ManagementState: &daemonpb.ManagementState{URL: "https://m.test:443", Connected: true, PendingApproval: pending}}}
		js := toJSON(r)
		for _, detail := range []bool{false, true} {
			var b bytes.Buffer
			printText(&b, js, detail)
			if got := strings.Contains(b.String(), "pending approval"); got != pending {
				t.Errorf("pending=%v detail=%v: text says pending approval: %v\n%s", pending, detail, got, b.String())
			}
		}
		raw, err := json.Marshal(js)
		if err != nil {
			t.Fatal(err)
		}
		var back struct {
			Management map[string]any `json:"management"`
		}
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		if got, _ := back.Management["pendingApproval"].(bool); got != pending {
			t.Errorf("pending=%v: JSON management.pendingApproval = %v (%s)", pending, back.Management["pendingApproval"], raw)
		}
	}
}

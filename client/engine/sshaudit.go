package engine

import (
	"context"
	"time"

	"github.com/wiremesh/wiremesh/client/sshaudit"
)

// sshAuditEvery is how often queued SSH events are sent: a session shows
// in the activity log about a second after it starts.
const sshAuditEvery = time.Second

// reportSSH sends the SSH server's events to management until ctx ends
// (client/sshaudit). Events still queued then are lost with the run.
func (e *Engine) reportSSH(ctx context.Context) {
	t := time.NewTicker(sshAuditEvery)
	defer t.Stop()
	e.audit.Run(ctx, t.C)
}

// RecordSSHHostKeyMismatch queues a host key mismatch this peer's own
// `netbird ssh` saw, for the activity log (the daemon checked it:
// client/daemon/sshhostkey.go).
func (e *Engine) RecordSSHHostKeyMismatch(m sshaudit.HostKeyMismatch) {
	e.audit.RecordHostKeyMismatch(m)
}

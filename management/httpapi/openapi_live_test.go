package httpapi_test

import (
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/httpapi"
)

// conformLive opens the live event stream as the document describes it
// (200, text/event-stream) and reads its first event; the stream never
// ends on its own, so it is not read through callBytes.
func conformLive(t *testing.T, d *docRig) {
	t.Helper()
	op := d.doc.Paths.Value(httpapi.EventStreamPath)
	if op == nil || op.Get == nil || op.Get.Responses.Status(200) == nil || op.Get.Responses.Status(200).Value.Content.Get("text/event-stream") == nil {
		t.Fatalf("openapi.json does not describe GET %s answering 200 text/event-stream", httpapi.EventStreamPath)
	}
	s, code, msg := openStream(t, d.url, "Token "+d.token)
	if s == nil {
		t.Fatalf("GET %s: %d %s", httpapi.EventStreamPath, code, msg)
	}
	if ev, _ := s.next(t, 5*time.Second); ev.name != "ready" {
		t.Fatalf("first event %+v, want ready", ev)
	}
	s.stop()
	d.tried["GET "+httpapi.EventStreamPath] = struct{}{}
	d.covered["GET "+httpapi.EventStreamPath] = struct{}{}
}

package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// A Job stream that never sends its handshake is ended by the server
// after Options.JobFirstMessage, instead of being held forever.
func TestJobWithoutFirstMessageEnds(t *testing.T) {
	e := startWith(t, t.TempDir(), server.Options{JobFirstMessage: 200 * time.Millisecond})
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js, err := mgmtpb.NewManagementServiceClient(e.conn).Job(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Recv(); code(err) != codes.DeadlineExceeded || c.Err() != nil {
		t.Fatalf("silent job stream: %v (client context %v), want the server to end it with DeadlineExceeded", err, c.Err())
	}
}

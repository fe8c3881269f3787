package grpcapi

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/peers"
)

// TestLoginErrorSSHKeyTaken: a login refused for a duplicate SSH key
// reaches the agent as PermissionDenied naming the field, not as an
// opaque internal error it would retry for ever.
func TestLoginErrorSSHKeyTaken(t *testing.T) {
	err := (&Server{}).loginError(context.Background(), key.Public{}, fmt.Errorf("login: %w", peers.ErrSSHKeyTaken))
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "peer_keys.ssh_pub_key") {
		t.Fatalf("got %v", err)
	}
}

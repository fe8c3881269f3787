package mgmtclient

import (
	"context"

	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// SSHEvents sends a batch of this agent's SSH server events (a wiremesh
// extension: a NetBird server answers codes.Unimplemented).
func (c *Client) SSHEvents(ctx context.Context, req *mgmtpb.WiremeshSSHEventsRequest) error {
	sh, err := c.shared(ctx)
	if err != nil {
		return err
	}
	body, err := sh.SealProto(req)
	if err != nil {
		return err
	}
	_, err = c.api.WiremeshSSHEvents(ctx, &mgmtpb.EncryptedMessage{WgPubKey: c.priv.Public().String(), Body: body})
	return c.explain(err)
}

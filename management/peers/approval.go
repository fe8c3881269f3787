package peers

import (
	"context"
	"fmt"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// Activity codes of peer approval in the activity log (the REST API's
// activity_code values).
const (
	ActivityPeerApprove        = "peer.approve"
	ActivityPeerApprovalRevoke = "peer.approval.revoke"
)

// setApproval approves p (required=false) or makes it pending again
// (required=true, only while the account's peer approval is on) and
// records it. The caller bumps the serial.
func setApproval(ctx context.Context, at *store.AccountTx, set account.Settings, p *account.Peer, required bool, initiator string, now time.Time) error {
	activity := ActivityPeerApprove
	if required {
		if !set.Extra.PeerApprovalEnabled {
			return fmt.Errorf("%w: approval_required can be set to true only while the account's peer approval (settings.extra.peer_approval_enabled) is on", ErrInvalid)
		}
		activity = ActivityPeerApprovalRevoke
	}
	if err := at.SetPeerApproval(ctx, p.ID, required); err != nil {
		return err
	}
	p.ApprovalRequired = required
	_, err := at.InsertEvent(ctx, account.Event{At: now, Activity: activity, Initiator: initiator, Target: string(p.ID),
		Meta: map[string]string{"name": p.Name, "ip": p.IP.String()}})
	return err
}

// ApproveOnSettingsChange approves every pending peer when a settings
// change turns peer approval off (as the reference server does: pending
// peers are not left stranded behind a switch nobody sees any more), with
// a peer.approve event for each. It runs in the settings change's
// transaction; the caller bumps the serial. It returns how many peers it
// approved.
func ApproveOnSettingsChange(ctx context.Context, at *store.AccountTx, old, set account.Settings, initiator string, now time.Time) (int, error) {
	if !old.Extra.PeerApprovalEnabled || set.Extra.PeerApprovalEnabled {
		return 0, nil
	}
	ps, err := at.ApprovePendingPeers(ctx)
	if err != nil {
		return 0, fmt.Errorf("approve pending peers: %w", err)
	}
	for _, p := range ps {
		if _, err := at.InsertEvent(ctx, account.Event{At: now, Activity: ActivityPeerApprove, Initiator: initiator, Target: string(p.ID),
			Meta: map[string]string{"name": p.Name, "ip": p.IP.String(), "reason": "peer approval turned off"}}); err != nil {
			return 0, err
		}
	}
	return len(ps), nil
}

// pendingMeta marks a registration event's details when the new peer
// waits for approval.
func pendingMeta(p account.Peer, meta map[string]string) map[string]string {
	if p.ApprovalRequired {
		meta["pending_approval"] = "true"
	}
	return meta
}

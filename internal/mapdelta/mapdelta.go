// Package mapdelta turns network map deltas (a wiremesh extension of the
// Sync stream) back into whole maps on the client side.
package mapdelta

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/dnszone"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// State is the network map a Sync stream has delivered so far, so that
// deltas (the wiremesh extension this client asks for) can be turned back
// into whole maps for the engine.
type State struct {
	nm     *mgmtpb.NetworkMap
	checks []*mgmtpb.Checks
}

// Update folds one response into the state and returns the response the
// engine should see: full maps pass through (and are remembered), a delta
// becomes the whole map it leads to. An error means the delta does not fit
// the map held (the stream must start over, which sends a full map).
func (s *State) Update(r *mgmtpb.SyncResponse) (*mgmtpb.SyncResponse, error) {
	if nm := r.GetNetworkMap(); nm != nil {
		dnszone.Fill(nm) // records the server left for us to build
		s.nm, s.checks = nm, r.GetChecks()
		return r, nil
	}
	d := r.GetWiremeshDelta()
	if d == nil {
		return r, nil
	}
	if s.nm == nil {
		return nil, fmt.Errorf("network map delta before any map")
	}
	if d.GetBaseSerial() != s.nm.GetSerial() {
		return nil, fmt.Errorf("network map delta from serial %d, the map held is at %d", d.GetBaseSerial(), s.nm.GetSerial())
	}
	nm := Apply(s.nm, d)
	s.nm = nm
	out := &mgmtpb.SyncResponse{NetbirdConfig: r.GetNetbirdConfig(), NetworkMap: nm, Checks: s.checks}
	return out, nil
}

// Apply returns a new map: nm with d applied (nm is not modified).
func Apply(nm *mgmtpb.NetworkMap, d *mgmtpb.NetworkMapDelta) *mgmtpb.NetworkMap {
	out := proto.Clone(nm).(*mgmtpb.NetworkMap)
	out.Serial = d.GetSerial()
	drop := map[string]bool{}
	for _, k := range d.GetRemovedPeers() {
		drop[k] = true
	}
	for _, p := range d.GetUpsertPeers() {
		drop[p.GetWgPubKey()] = true
	}
	out.RemotePeers = slices.DeleteFunc(out.RemotePeers, func(p *mgmtpb.RemotePeerConfig) bool { return drop[p.GetWgPubKey()] })
	out.RemotePeers = append(out.RemotePeers, d.GetUpsertPeers()...)
	out.RemotePeersIsEmpty = len(out.RemotePeers) == 0
	for _, r := range d.GetRemoveRules() {
		if i := slices.IndexFunc(out.FirewallRules, func(x *mgmtpb.FirewallRule) bool { return proto.Equal(x, r) }); i >= 0 {
			out.FirewallRules = slices.Delete(out.FirewallRules, i, i+1)
		}
	}
	out.FirewallRules = append(out.FirewallRules, d.GetAddRules()...)
	out.FirewallRulesIsEmpty = len(out.FirewallRules) == 0
	// Peer names follow the peers: the delta carries no DNS records.
	dnszone.Refresh(out)
	return out
}

package daemon

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/client/engine"
	"github.com/wiremesh/wiremesh/client/routes"
	"github.com/wiremesh/wiremesh/client/state"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// errNotConnected answers the network RPCs while no engine runs: the
// networks come with the network map.
var errNotConnected = status.Error(codes.FailedPrecondition, "not connected: the networks come from the management server (run netbird up first)")

// ListNetworks lists the networks and exit nodes management offers this
// peer, in the official client's order (widest first, then by address
// and ID), with the routing peers of each and the one in use.
func (s *Server) ListNetworks(context.Context, *daemonpb.ListNetworksRequest) (*daemonpb.ListNetworksResponse, error) {
	s.mu.Lock()
	e := s.eng
	s.mu.Unlock()
	if e == nil {
		return nil, errNotConnected
	}
	out := &daemonpb.ListNetworksResponse{}
	for _, n := range sortNetworks(e.Networks()) {
		// An exit node for IPv4 and IPv6 is one entry, its range shown
		// as the official daemon does: "0.0.0.0/0, ::/0".
		pn := &daemonpb.Network{ID: n.ID, Range: strings.Join(ranges(n), ", "), Selected: n.Selected, Domains: n.Domains, ExitNode: n.ExitNode,
			ResolvedIPs: map[string]*daemonpb.IPList{}, Peers: n.Peers, Chosen: n.Chosen}
		for d, ips := range n.ResolvedIPs {
			pn.ResolvedIPs[d] = &daemonpb.IPList{Ips: ips}
		}
		out.Routes = append(out.Routes, pn)
	}
	return out, nil
}

// SelectNetworks selects networks (all: every network, exit nodes as
// management applies them) and saves the selection in the profile, so
// it outlives a restart. Unknown IDs change nothing.
func (s *Server) SelectNetworks(_ context.Context, req *daemonpb.SelectNetworksRequest) (*daemonpb.SelectNetworksResponse, error) {
	err := s.changeSelection(req.GetNetworkIDs(), req.GetAll(), func(e session) error {
		return e.SelectNetworks(req.GetNetworkIDs(), req.GetAppend(), req.GetAll())
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("network selection changed", "networks", strings.Join(req.GetNetworkIDs(), ", "), "append", req.GetAppend(), "all", req.GetAll())
	return &daemonpb.SelectNetworksResponse{}, nil
}

// DeselectNetworks deselects networks (all: every one, new ones too) and
// saves the selection in the profile.
func (s *Server) DeselectNetworks(_ context.Context, req *daemonpb.SelectNetworksRequest) (*daemonpb.SelectNetworksResponse, error) {
	err := s.changeSelection(req.GetNetworkIDs(), req.GetAll(), func(e session) error {
		return e.DeselectNetworks(req.GetNetworkIDs(), req.GetAll())
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("network deselection changed", "networks", strings.Join(req.GetNetworkIDs(), ", "), "all", req.GetAll())
	return &daemonpb.SelectNetworksResponse{}, nil
}

// changeSelection checks ids against the networks offered, applies the
// change to the engine and saves the engine's resulting selection in the
// running profile. s.op serializes it with up, down and profile switches,
// which write the same profile file.
func (s *Server) changeSelection(ids []string, all bool, apply func(session) error) error {
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	e, profile := s.eng, s.engProfile
	s.mu.Unlock()
	if e == nil {
		return errNotConnected
	}
	if !all {
		if err := checkIDs(ids, e.Networks()); err != nil {
			return err
		}
	}
	if err := apply(e); err != nil {
		code := codes.FailedPrecondition
		switch {
		case errors.Is(err, routes.ErrUnknownNetwork):
			code = codes.NotFound
		case errors.Is(err, routes.ErrTwoExitNodes):
			code = codes.InvalidArgument
		}
		return status.Error(code, err.Error())
	}
	cfg, err := state.Load(s.path(profile))
	if err == nil {
		cfg.Routes = storedSelection(e.RouteSelection())
		err = state.Save(s.path(profile), cfg)
	}
	if err != nil {
		return status.Errorf(codes.Internal, "the selection is in use but could not be saved (a restart will lose it): %v", err)
	}
	return nil
}

// checkIDs rejects an empty list and IDs the map does not offer, naming
// what is offered.
func checkIDs(ids []string, offered []engine.Network) error {
	if len(ids) == 0 {
		return status.Error(codes.InvalidArgument, "name at least one network ID, or all (see netbird networks ls)")
	}
	known := make([]string, 0, len(offered))
	for _, n := range offered {
		known = append(known, n.ID)
	}
	slices.Sort(known)
	var bad []string
	for _, id := range ids {
		if !slices.Contains(known, id) {
			bad = append(bad, id)
		}
	}
	switch {
	case len(bad) == 0:
		return nil
	case len(known) == 0:
		return status.Errorf(codes.NotFound, "no network %s: management offers this peer no networks", strings.Join(bad, ", "))
	}
	return status.Errorf(codes.NotFound, "no network %s: this peer is offered %s", strings.Join(bad, ", "), strings.Join(known, ", "))
}

// storedSelection and engineSelection convert between the profile's
// record of the selection and the engine's.
func storedSelection(r engine.RouteSelection) state.RouteSelection {
	return state.RouteSelection{Selected: r.Selected, Deselected: r.Deselected, AllDeselected: r.AllDeselected}
}

func engineSelection(r state.RouteSelection) engine.RouteSelection {
	return engine.RouteSelection{Selected: r.Selected, Deselected: r.Deselected, AllDeselected: r.AllDeselected}
}

// sortNetworks orders networks as the official daemon lists them: by
// prefix length (domain routes, which have none, first), then address,
// then ID.
func sortNetworks(ns []engine.Network) []engine.Network {
	ns = slices.Clone(ns)
	bits := func(n engine.Network) (int, string) {
		rs := ranges(n)
		if len(rs) == 0 || len(n.Domains) > 0 {
			return -1, ""
		}
		p, err := netip.ParsePrefix(rs[0])
		if err != nil {
			return -1, ""
		}
		return p.Bits(), p.Addr().String()
	}
	slices.SortStableFunc(ns, func(a, b engine.Network) int {
		ab, aa := bits(a)
		bb, ba := bits(b)
		if ab != bb {
			return ab - bb
		}
		if c := strings.Compare(aa, ba); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return ns
}

// ranges splits a network's range ("a,b" for one network over both
// address families) into its prefixes.
func ranges(n engine.Network) []string {
	var out []string
	for _, r := range strings.Split(n.Range, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	return out
}

// routeStatus fills the status with the networks: per remote peer the
// ones it carries for us (as the official status, the prefixes, or the
// domains of a domain route), the exit node in use, and a revision that
// changes with the networks or their selection. The engine names routing
// peers by FQDN, or by key when the map gives no name.
func routeStatus(fs *daemonpb.FullStatus, ns []engine.Network) {
	byPeer := map[string][]string{}
	h := fnv.New64a()
	for _, n := range sortNetworks(ns) {
		fmt.Fprintf(h, "%s|%s|%s|%v|%v\n", n.ID, n.Range, strings.Join(n.Domains, ","), n.Selected, n.ExitNode)
		if !n.Selected {
			continue
		}
		if n.ExitNode && fs.LocalPeerState.ExitNode == "" {
			fs.LocalPeerState.ExitNode = n.ID
			fs.LocalPeerState.ExitNodePeer = n.Chosen
		}
		if n.Chosen == "" {
			continue
		}
		what := ranges(n)
		if len(n.Domains) > 0 {
			what = n.Domains
		}
		byPeer[n.Chosen] = append(byPeer[n.Chosen], what...)
	}
	fs.NetworksRevision = h.Sum64()
	for _, p := range fs.Peers {
		if ns, ok := byPeer[p.Fqdn]; ok && p.Fqdn != "" {
			p.Networks = ns
		} else {
			p.Networks = byPeer[p.PubKey]
		}
	}
}

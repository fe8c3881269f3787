package daemon

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/client/state"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

var errFixed = status.Error(codes.FailedPrecondition, "the daemon runs with --config (one fixed profile): profiles are not available")

// AddProfile creates a profile with its own key.
func (s *Server) AddProfile(_ context.Context, req *daemonpb.AddProfileRequest) (*daemonpb.AddProfileResponse, error) {
	if s.fixed != "" {
		return nil, errFixed
	}
	s.op.Lock()
	defer s.op.Unlock()
	if err := s.profiles.Add(req.GetProfileName()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &daemonpb.AddProfileResponse{}, nil
}

// RemoveProfile deletes a profile that is not in use.
func (s *Server) RemoveProfile(_ context.Context, req *daemonpb.RemoveProfileRequest) (*daemonpb.RemoveProfileResponse, error) {
	if s.fixed != "" {
		return nil, errFixed
	}
	s.op.Lock()
	defer s.op.Unlock()
	if err := s.profiles.Remove(req.GetProfileName()); err != nil {
		code := codes.FailedPrecondition
		if errors.Is(err, state.ErrNoProfile) {
			code = codes.NotFound
		}
		return nil, status.Error(code, err.Error())
	}
	return &daemonpb.RemoveProfileResponse{}, nil
}

// ListProfiles lists the profiles and the server each points at.
func (s *Server) ListProfiles(context.Context, *daemonpb.ListProfilesRequest) (*daemonpb.ListProfilesResponse, error) {
	active := s.active()
	names := []string{state.DefaultProfile}
	if s.fixed == "" {
		names = s.profiles.List()
	}
	out := &daemonpb.ListProfilesResponse{}
	for _, n := range names {
		p := &daemonpb.Profile{Name: n, IsActive: n == active}
		if cfg, err := state.Load(s.path(n)); err == nil {
			p.ManagementUrl = cfg.ManagementURL
		}
		out.Profiles = append(out.Profiles, p)
	}
	return out, nil
}

// GetActiveProfile names the selected profile.
func (s *Server) GetActiveProfile(context.Context, *daemonpb.GetActiveProfileRequest) (*daemonpb.GetActiveProfileResponse, error) {
	return &daemonpb.GetActiveProfileResponse{ProfileName: s.active()}, nil
}

// SwitchProfile selects a profile. If a session is running, it switches
// to the new profile live (when that profile has a server to join); a
// profile that cannot connect leaves the running session and the
// selection as they were.
func (s *Server) SwitchProfile(ctx context.Context, req *daemonpb.SwitchProfileRequest) (*daemonpb.SwitchProfileResponse, error) {
	if s.fixed != "" {
		return nil, errFixed
	}
	s.op.Lock()
	defer s.op.Unlock()
	name, prev := req.GetProfileName(), s.active()
	if !s.profiles.Exists(name) {
		return nil, status.Errorf(codes.NotFound, "no profile %q (create it with: netbird profile add %s)", name, name)
	}
	s.mu.Lock()
	running := s.eng != nil
	s.mu.Unlock()
	if err := s.profiles.SetActive(name); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if !running || name == prev {
		return &daemonpb.SwitchProfileResponse{}, nil
	}
	cfg, err := state.Load(s.path(name))
	if err == nil && cfg.ManagementURL == "" {
		// Nothing to join yet: stop the old session, the user runs up next.
		s.stop()
		return &daemonpb.SwitchProfileResponse{}, nil
	}
	if err := s.up(ctx, name); err != nil {
		_ = s.profiles.SetActive(prev)
		return nil, err
	}
	return &daemonpb.SwitchProfileResponse{}, nil
}

//go:build !linux

package wg

import (
	"errors"
	"log/slog"
	"net/netip"

	"github.com/wiremesh/wiremesh/internal/key"
)

// ErrNoKernel reports that there is no kernel WireGuard to use.
var ErrNoKernel = errors.New("no kernel WireGuard on this system")

// External is Linux only.
type External struct{}

// NewKernel fails here.
func NewKernel(Config, *slog.Logger) (*External, error) { return nil, ErrNoKernel }

func (*External) Name() string                             { return "" }
func (*External) Bind() *Bind                              { return nil }
func (*External) Port() int                                { return 0 }
func (*External) SetAddress(netip.Prefix, int) error       { return ErrNoKernel }
func (*External) SetAddress6(netip.Prefix) error           { return ErrNoKernel }
func (*External) SetPeer(Peer) error                       { return ErrNoKernel }
func (*External) RemovePeer(key.Public) error              { return ErrNoKernel }
func (*External) PeerStats() (map[key.Public]Stats, error) { return nil, ErrNoKernel }
func (*External) Close()                                   {}

package routes

import "context"

// NewSystem returns Windows' routing table driven by netsh and route,
// after removing what a killed agent left behind.
func NewSystem(cfg SystemConfig) (System, error) {
	return newCmdSystem(context.Background(), cfg, windowsCommands{}, execRunner)
}

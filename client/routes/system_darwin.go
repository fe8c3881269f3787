package routes

import "context"

// NewSystem returns macOS's routing table driven by route(8), after
// removing what a killed agent left behind.
func NewSystem(cfg SystemConfig) (System, error) {
	return newCmdSystem(context.Background(), cfg, darwinCommands{}, execRunner)
}

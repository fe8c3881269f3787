//go:build !linux && !darwin && !windows

package routes

// NewSystem reports that this operating system cannot install routes.
func NewSystem(SystemConfig) (System, error) { return nil, ErrNotSupported }

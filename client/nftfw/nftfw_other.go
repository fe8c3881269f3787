//go:build !linux

package nftfw

import (
	"errors"

	"github.com/wiremesh/wiremesh/client/acl"
)

// Firewall is Linux only.
type Firewall struct{}

// New fails: nftables is part of Linux.
func New(string) (*Firewall, error) {
	return nil, errors.New("the nftables firewall exists only on Linux; use the userspace one")
}

// Table is empty.
func (*Firewall) Table() string { return "" }

// SetRules does nothing.
func (*Firewall) SetRules([]acl.Rule, bool) error { return nil }

// Close does nothing.
func (*Firewall) Close() error { return nil }

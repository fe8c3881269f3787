//go:build !linux

package nftfw

import (
	"errors"
	"net/netip"

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

// SetOverlay does nothing.
func (*Firewall) SetOverlay(netip.Prefix) error { return nil }

// SetOverlay6 does nothing.
func (*Firewall) SetOverlay6(netip.Prefix) error { return nil }

// SetServices does nothing.
func (*Firewall) SetServices(acl.Services) error { return nil }

// SetRouting does nothing.
func (*Firewall) SetRouting(acl.Routing) error { return nil }

// NAT is Linux only.
type NAT struct{}

// NATTable is the name of the NAT table for iface.
func NATTable(iface string) string { return "wiremesh-nat-" + iface }

// NewNAT fails: nftables is part of Linux.
func NewNAT(string) (*NAT, error) {
	return nil, errors.New("masquerade for routed networks uses nftables, which exists only on Linux")
}

// Set does nothing.
func (*NAT) Set([]netip.Prefix, []netip.Prefix) error { return nil }

// Close does nothing.
func (*NAT) Close() error { return nil }

// RemoveTable does nothing.
func RemoveTable(string) error { return nil }

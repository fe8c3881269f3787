//go:build !linux

package forward

import "errors"

// nftNAT fails: this agent routes for its peers on Linux only.
func nftNAT(string) (nat, func(string) error, error) {
	return nil, nil, errors.New("acting as a routing peer is supported on Linux only")
}

func natTable(iface string) string { return "wiremesh-nat-" + iface }

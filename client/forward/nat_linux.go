package forward

import "github.com/wiremesh/wiremesh/client/nftfw"

func nftNAT(iface string) (nat, func(string) error, error) {
	n, err := nftfw.NewNAT(iface)
	if err != nil {
		return nil, nil, err
	}
	return n, nftfw.RemoveTable, nil
}

func natTable(iface string) string { return nftfw.NATTable(iface) }

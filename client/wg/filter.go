package wg

import "golang.zx2c4.com/wireguard/tun"

// PacketFilter decides on packets crossing the TUN device: Outbound for
// what the host sends to peers, Inbound for what peers send to the host.
type PacketFilter interface {
	Outbound(pkt []byte) bool
	Inbound(pkt []byte) bool
}

// filteredTUN applies a PacketFilter where wireguard-go meets the TUN
// device, so a refused packet never reaches the host's stack (inbound) or
// the tunnel (outbound).
type filteredTUN struct {
	tun.Device
	f PacketFilter
}

// Read drops refused packets by zeroing their size, which wireguard-go
// skips.
func (t *filteredTUN) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	n, err := t.Device.Read(bufs, sizes, offset)
	for i := 0; i < n; i++ {
		if sizes[i] > 0 && !t.f.Outbound(bufs[i][offset:offset+sizes[i]]) {
			sizes[i] = 0
		}
	}
	return n, err
}

// Write passes on the accepted packets only.
func (t *filteredTUN) Write(bufs [][]byte, offset int) (int, error) {
	kept := bufs
	for i, b := range bufs {
		if len(b) > offset && t.f.Inbound(b[offset:]) {
			if len(kept) < len(bufs) {
				kept = append(kept, b)
			}
			continue
		}
		if len(kept) == len(bufs) {
			kept = append(make([][]byte, 0, len(bufs)), bufs[:i]...) // first refusal: copy what passed so far
		}
	}
	if len(kept) == 0 {
		return len(bufs), nil
	}
	if _, err := t.Device.Write(kept, offset); err != nil {
		return 0, err
	}
	return len(bufs), nil
}

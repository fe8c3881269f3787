package httpapi

import (
	"strconv"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/peerconns"
)

// A peer's connections as our agents report them (peerconns): counts by
// type on every peer, and on GET /api/peers/{id} one entry per remote
// peer. Both are live state, read for every answer and never cached.

// connCounts is the `connections` object.
type connCounts struct {
	P2P        int `json:"p2p"`
	Relayed    int `json:"relayed"`
	Connecting int `json:"connecting"`
}

// peerConnJSON is one entry of `peer_connections`.
type peerConnJSON struct {
	PeerID string `json:"peer_id"`
	Type   string `json:"type"`
	// LatencyMS is the round-trip time in milliseconds, when measured.
	LatencyMS *float64 `json:"latency_ms,omitempty"`
}

func countsJSON(c peerconns.Counts) *connCounts {
	return &connCounts{P2P: c.P2P, Relayed: c.Relayed, Connecting: c.Connecting}
}

// connsOf reads a peer's report: its counts (nil: it has none) and, with
// list, its entries.
func (a *API) connsOf(acc account.ID, id account.PeerID, list bool) (*connCounts, []peerConnJSON) {
	conns, ok := a.o.Conns.Of(acc, id)
	if !ok {
		return nil, nil
	}
	var c peerconns.Counts
	var out []peerConnJSON
	for _, x := range conns {
		switch x.Type {
		case peerconns.P2P:
			c.P2P++
		case peerconns.Relayed:
			c.Relayed++
		case peerconns.Connecting:
			c.Connecting++
		}
		if list {
			j := peerConnJSON{PeerID: string(x.Peer), Type: x.Type.String()}
			if x.Latency > 0 {
				ms := float64(x.Latency.Microseconds()) / 1000
				j.LatencyMS = &ms
			}
			out = append(out, j)
		}
	}
	return countsJSON(c), out
}

// appendConns appends the two fields as encoding/json writes them (both
// omitempty).
func appendConns(b []byte, c *connCounts, list []peerConnJSON) []byte {
	if c != nil {
		b = strconv.AppendInt(append(b, `,"connections":{"p2p":`...), int64(c.P2P), 10)
		b = strconv.AppendInt(append(b, `,"relayed":`...), int64(c.Relayed), 10)
		b = strconv.AppendInt(append(b, `,"connecting":`...), int64(c.Connecting), 10)
		b = append(b, '}')
	}
	if len(list) == 0 {
		return b
	}
	b = append(b, `,"peer_connections":[`...)
	for i, x := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendField(b, `{"peer_id":`, x.PeerID)
		b = appendField(b, `,"type":`, x.Type)
		if x.LatencyMS != nil {
			b = strconv.AppendFloat(append(b, `,"latency_ms":`...), *x.LatencyMS, 'f', -1, 64)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

package main

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the SyncResponse parts a simulated peer reads
// (proto/management.proto).
const (
	fieldNetworkMap   = 5    // SyncResponse.NetworkMap
	fieldDelta        = 1000 // SyncResponse.wiremeshDelta
	fieldRemotePeers  = 3    // NetworkMap.remotePeers
	fieldUpsertPeers  = 3    // NetworkMapDelta.upsertPeers
	fieldPeerWgPubKey = 1    // RemotePeerConfig.wgPubKey
)

var errMalformed = errors.New("malformed SyncResponse")

// scan reads a SyncResponse the way a simulated peer needs it, without
// building it: whether it carries a network map (whole or a delta), and
// whether that map's remote peers (a delta's upserted peers) include the
// peer whose WireGuard key is want (never, for an empty want). A peer has
// no WireGuard to configure, so decoding 50,000 peer configs into objects
// for every first map would only load the two cores the server is
// measured on; scan touches each byte once and allocates nothing.
func scan(b []byte, want string) (isMap, listed bool, err error) {
	err = fields(b, func(num protowire.Number, v []byte) error {
		var peersField protowire.Number
		switch num {
		case fieldNetworkMap:
			peersField = fieldRemotePeers
		case fieldDelta:
			peersField = fieldUpsertPeers
		default:
			return nil
		}
		isMap = true
		return fields(v, func(num protowire.Number, peer []byte) error {
			if num != peersField || want == "" || listed {
				return nil
			}
			var key []byte // the last one counts, as when unmarshaling
			err := fields(peer, func(num protowire.Number, k []byte) error {
				if num == fieldPeerWgPubKey {
					key = k
				}
				return nil
			})
			listed = string(key) == want
			return err
		})
	})
	return isMap, listed, err
}

// fields calls fn with every length-delimited field of the message b
// (repeated ones as many times as they appear) and skips the others.
func fields(b []byte, fn func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return errMalformed
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		if err := fn(num, v); err != nil {
			return err
		}
	}
	return nil
}

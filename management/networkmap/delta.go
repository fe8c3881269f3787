package networkmap

import (
	"maps"
	"reflect"
	"sort"

	"github.com/wiremesh/wiremesh/management/account"
)

// Change is one peer that differs between two account states.
type Change struct {
	ID       account.PeerID
	Old, New *account.Peer // nil: absent in that state
	// Shown is whether what a map shows of the peer differs (its record:
	// key, address, name, SSH key); a change of metadata alone (posture)
	// leaves it false.
	Shown bool
}

// PeerLocal compares two states of one account. When they differ only in
// some peers (added, removed or changed, with the group memberships of
// those peers), it returns them: every other peer's map then differs from
// its old one only in what it shows of, and its rules about, those peers
// (see Pair). Peers whose DNS configuration alone changed are among them,
// with Shown false. ok=false means something broader changed (a policy, a group
// of an unchanged peer, a posture check, the account's settings): maps
// must be computed whole.
func PeerLocal(old, ix *Index) (changes []Change, ok bool) {
	if old.acc.ID != ix.acc.ID || old.acc.Domain != ix.acc.Domain || old.acc.Network != ix.acc.Network || old.acc.NetworkV6 != ix.acc.NetworkV6 ||
		FlagsOf(old.acc.Settings) != FlagsOf(ix.acc.Settings) || old.fwdPort != ix.fwdPort ||
		old.allowAll != ix.allowAll || !reflect.DeepEqual(old.checks, ix.checks) || len(old.rules) != len(ix.rules) ||
		!maps.Equal(old.temp, ix.temp) || !maps.Equal(old.expand, ix.expand) {
		return nil, false
	}
	changed := map[account.PeerID]bool{}
	metaMatters := len(ix.checks) > 0
	for id, p := range old.byID {
		q, still := ix.byID[id]
		switch {
		case !still:
			changes = append(changes, Change{ID: id, Old: old.peer(id)})
		case old.records[id] != ix.records[id]:
			changes = append(changes, Change{ID: id, Old: old.peer(id), New: ix.peer(id), Shown: true})
		case metaMatters && !reflect.DeepEqual(p.Meta, q.Meta):
			changes = append(changes, Change{ID: id, Old: old.peer(id), New: ix.peer(id)})
		default:
			continue
		}
		changed[id] = true
	}
	for id := range ix.byID {
		if _, was := old.byID[id]; !was {
			changes = append(changes, Change{ID: id, New: ix.peer(id), Shown: true})
			changed[id] = true
		}
	}
	if !sameRouting(&old.rt, &ix.rt, changed) {
		return nil, false
	}
	for i := range ix.rules {
		a, b := &old.rules[i], &ix.rules[i]
		if a.policy != b.policy || !reflect.DeepEqual(a.r, b.r) || !sameExcept(a.src, b.src, changed) || !sameExcept(a.dst, b.dst, changed) {
			return nil, false
		}
	}
	// A peer whose DNS configuration changed needs its whole map (a delta
	// carries no DNS); what others see of it is unchanged.
	for _, id := range dnsChanged(old, ix, changed) {
		changes = append(changes, Change{ID: id, Old: old.peer(id), New: ix.peer(id)})
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].ID < changes[j].ID })
	return changes, true
}

// sameExcept reports whether two peer sets agree on every peer not in skip.
func sameExcept(a, b, skip map[account.PeerID]bool) bool {
	for id := range a {
		if !b[id] && !skip[id] {
			return false
		}
	}
	for id := range b {
		if !a[id] && !skip[id] {
			return false
		}
	}
	return true
}

// peer returns a pointer into the state's peers (never modified).
func (ix *Index) peer(id account.PeerID) *account.Peer {
	i := sort.Search(len(ix.peers), func(i int) bool { return !ix.peers[i].IP.Less(ix.byID[id].IP) })
	if i < len(ix.peers) && ix.peers[i].ID == id {
		return &ix.peers[i]
	}
	return nil
}

// Peer returns one peer of the state (ok=false on a nil Index too).
func (ix *Index) Peer(id account.PeerID) (account.Peer, bool) {
	if ix == nil {
		return account.Peer{}, false
	}
	p, ok := ix.byID[id]
	return p, ok
}

// Domain is the account's DNS domain in this state.
func (ix *Index) Domain() string {
	if ix == nil {
		return ""
	}
	return ix.acc.Domain
}

// Has reports whether the state holds the peer.
func (ix *Index) Has(id account.PeerID) bool { _, ok := ix.byID[id]; return ok }

// Serial is the state's account serial.
func (ix *Index) Serial() uint64 { return ix.acc.Serial }

// Pair is self's map restricted to other: whether it lists other, and its
// firewall rules about other, exactly as Compute gives them.
func (ix *Index) Pair(self, other account.PeerID) (visible bool, rules []FirewallRule) {
	if self == other || !ix.Has(self) || !ix.Has(other) || ix.byID[self].ApprovalRequired || ix.byID[other].ApprovalRequired {
		return false, nil
	}
	compact := ix.compact(self)
	visible = compact && !ix.temp[other] || ix.rt.links[self][other]
	ip := ix.byID[other].IP
	selfV6 := ix.v6[self]
	if ix.spelled(self) && !ix.temp[other] {
		visible = true
		rs := ix.allowAllRules(ip)
		rules = append(rules, rs...)
		rules = append(rules, ix.v6Rules(selfV6, other, rs)...)
	}
	add := func(dir Direction, rr *rule) {
		if rr.r.Action == account.ActionAccept {
			visible = true
			if compact {
				return
			}
		}
		fr := FirewallRule{Peer: ip, Direction: dir, Action: rr.r.Action, Protocol: rr.r.Protocol,
			Ports: rr.r.Ports, Ranges: rr.r.PortRanges, PolicyID: rr.policy}
		rules = append(rules, fr)
		if selfV6 && ix.v6[other] {
			fr.Peer = ix.byID[other].IPv6 // its v6 twin
			rules = append(rules, fr)
		}
	}
	for _, i := range ix.byPeer[self] {
		rr := &ix.rules[i]
		if rr.src[self] && rr.dst[other] {
			add(Out, rr)
			if rr.r.Bidirectional {
				add(In, rr)
			}
		}
		if rr.dst[self] && rr.src[other] {
			add(In, rr)
			if rr.r.Bidirectional {
				add(Out, rr)
			}
		}
	}
	sort.SliceStable(rules, func(i, j int) bool {
		if rules[i].Peer != rules[j].Peer {
			return rules[i].Peer.Less(rules[j].Peer)
		}
		if rules[i].Direction != rules[j].Direction {
			return rules[i].Direction < rules[j].Direction
		}
		return rules[i].PolicyID < rules[j].PolicyID
	})
	return visible, dedupe(rules)
}

// Between describes how the given peers differ from old to ix, for
// composing several PeerLocal steps (each peer changed in at least one).
func Between(old, ix *Index, ids []account.PeerID) []Change {
	out := make([]Change, 0, len(ids))
	for _, id := range ids {
		c := Change{ID: id, Old: old.peer(id), New: ix.peer(id)}
		if c.Old == nil && c.New == nil {
			continue // came and went in between
		}
		c.Shown = c.Old == nil || c.New == nil || old.records[id] != ix.records[id]
		out = append(out, c)
	}
	return out
}

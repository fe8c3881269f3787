package restapi

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
)

// dataset is one account's content, written to each server's store by its
// own seeder so that both answer the same requests over the same data. IDs
// are the same on both sides.
type dataset struct {
	peers, groups, policies, users, setupKeys, events int
	keys                                              []key.Public
	base                                              time.Time
}

func newDataset(peers int) dataset {
	d := dataset{peers: peers, groups: max(peers/10, 1), policies: max(peers/10, 1), users: 100, setupKeys: 100, events: peers,
		base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d.keys = make([]key.Public, peers)
	for i := range d.keys {
		pk, err := key.NewPrivate()
		if err != nil {
			panic(err)
		}
		d.keys[i] = pk.Public()
	}
	return d
}

func (d dataset) peerID(i int) string   { return fmt.Sprintf("bpeer%015d", i) }
func (d dataset) groupID(g int) string  { return fmt.Sprintf("bgroup%014d", g) }
func (d dataset) policyID(j int) string { return fmt.Sprintf("bpolicy%013d", j) }
func (d dataset) ruleID(j int) string   { return fmt.Sprintf("brule%015d", j) }
func (d dataset) userID(u int) string   { return fmt.Sprintf("buser%015d", u) }
func (d dataset) keyID(k int) string    { return fmt.Sprintf("bsetupkey%011d", k) }
func (d dataset) hostname(i int) string { return fmt.Sprintf("host-%05d", i) }

// ownerID is the user whose token both benchmarks use.
func (d dataset) ownerID() string { return d.userID(0) }

// peerIP is the i-th peer's address in network.
func (d dataset) peerIP(network netip.Prefix, i int) netip.Addr {
	a := network.Masked().Addr()
	for range i + 1 {
		a = a.Next()
	}
	return a
}

// peerUser is the user who added peer i, or -1 for a setup-key peer: every
// fourth peer belongs to one of the users.
func (d dataset) peerUser(i int) int {
	if i%4 != 0 {
		return -1
	}
	return 1 + (i/4)%(d.users-1)
}

// members are the peers of group g: each peer is in two groups (i mod G
// and i / (P/G)), so every group holds about 2P/G peers.
func (d dataset) members(g int) []int {
	seen := map[int]bool{}
	var out []int
	for i := g; i < d.peers; i += d.groups {
		seen[i] = true
		out = append(out, i)
	}
	per := max(d.peers/d.groups, 1)
	for i := g * per; i < min((g+1)*per, d.peers); i++ {
		if !seen[i] {
			out = append(out, i)
		}
	}
	return out
}

// policy j lets group j reach group j+1 on tcp/22 (every third one both ways).
func (d dataset) policy(j int) (src, dst int, bidirectional bool) {
	return j, (j + 1) % d.groups, j%3 == 0
}

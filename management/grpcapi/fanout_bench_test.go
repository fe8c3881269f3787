package grpcapi

import (
	"fmt"
	"hash/maphash"
	"net/netip"
	"testing"

	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/management/store"
)

// allToAll is an account of n peers (p0, p1, ... named h0, h1, ...) under
// the default All-to-All policy, and its index.
func allToAll(n int) (account.Account, []account.Peer, *networkmap.Index) {
	acc := account.Account{ID: "a", Domain: "netbird.selfhosted", Network: netip.MustParsePrefix("100.64.0.0/16"), Serial: 5}
	var ps []account.Peer
	ip := acc.Network.Addr()
	for i := range n {
		k, _ := key.NewPrivate()
		ip = ip.Next()
		ps = append(ps, account.Peer{ID: account.PeerID(fmt.Sprint("p", i)), AccountID: "a", Key: k.Public(), IP: ip, Name: fmt.Sprint("h", i), DNSLabel: fmt.Sprint("h", i)})
	}
	all, pol := store.DefaultAccess("a")
	return acc, ps, networkmap.NewIndex(acc, ps, networkmap.Access{Groups: []account.Group{all}, Policies: []account.Policy{pol}})
}

// BenchmarkFanout: one whole map (compute, convert, encode, seal) of an
// All-to-All account, for the official clients (peer DNS records in the
// map) and for our agent's first map (records derived by the agent).
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{2000, 50000} {
		for _, derived := range []bool{false, true} {
			b.Run(fmt.Sprintf("peers=%d/derivedDNS=%v", n, derived), func(b *testing.B) { benchFanout(b, n, derived) })
		}
	}
}

func benchFanout(b *testing.B, n int, derived bool) {
	acc, ps, ix := allToAll(n)
	k1, _ := key.NewPrivate()
	k2, _ := key.NewPrivate()
	sh := envelope.NewShared(k1, k2.Public())
	cache := remoteCache{}
	for i := range ps {
		cache[ps[i].ID] = newShown(&ps[i], acc.Domain, ix.IsV6(ps[i].ID))
	}
	seed := maphash.MakeSeed()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m, _ := ix.Compute(ps[i%len(ps)].ID)
		r, bk := syncResponse(m, nil, respFor{derivedDNS: derived}, cache)
		plain, _ := encodeMap(seed, r, bk)
		if _, err := sh.Seal(plain); err != nil {
			b.Fatal(err)
		}
	}
}

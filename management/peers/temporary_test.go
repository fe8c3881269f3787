package peers_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/tenant"
)

func TestParseTemporaryRule(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want account.Rule
		bad  bool
	}{
		{in: "tcp/22", want: account.Rule{Protocol: "tcp", Ports: []uint16{22}}},
		{in: " UDP/5000-5010 ", want: account.Rule{Protocol: "udp", PortRanges: []account.PortRange{{Start: 5000, End: 5010}}}},
		{in: "icmp", want: account.Rule{Protocol: "icmp"}},
		{in: "all", want: account.Rule{Protocol: "all"}},
		{in: "tcp/0", bad: true},
		{in: "tcp/65536", bad: true},
		{in: "tcp/90-80", bad: true},
		{in: "tcp/", bad: true},
		{in: "tcp/a", bad: true},
		{in: "icmp/8", bad: true},
		{in: "sctp/80", bad: true},
		{in: "netbird-ssh/22022", bad: true},
		{in: "80", bad: true},
		{in: "", bad: true},
	} {
		got, err := peers.ParseTemporaryRule(tc.in)
		if tc.bad {
			if !errors.Is(err, peers.ErrInvalid) {
				t.Errorf("%q: err %v, want ErrInvalid", tc.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		tc.want.Enabled, tc.want.Action = true, account.ActionAccept
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%q (-want +got):\n%s", tc.in, d)
		}
	}
}

// TestTemporaryPeer: a temporary peer is created with one policy per rule
// (nothing stored when the request is refused), and one that never
// connects is removed with its policies once TemporaryOffline passed, on
// an injected clock, with the activity codes of peer and policy changes.
func TestTemporaryPeer(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		ctx := context.Background()
		st := e.Open(t)
		clk := &clock{t: time.Now().UTC().Add(-time.Hour)}
		acc, err := tenant.Default(ctx, st, clk.now())
		if err != nil {
			t.Fatal(err)
		}
		svc := peers.New(st, nopNotifier{}, slog.New(slog.DiscardHandler), clk.now)
		sk, secret, err := setupkey.New(acc.ID, setupkey.Options{Name: "k", Reusable: true}, clk.now())
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).InsertSetupKey(ctx, sk) }); err != nil {
			t.Fatal(err)
		}
		tk, _ := key.NewPrivate()
		target, _, err := svc.Login(ctx, peers.LoginInput{Key: tk.Public(), SetupKey: secret, Meta: account.Meta{Hostname: "server"}})
		if err != nil {
			t.Fatal(err)
		}
		state := func() (ps []account.Peer, pols []account.Policy, es []account.Event) {
			t.Helper()
			err := st.Read(ctx, func(tx *store.Tx) error {
				at := tx.In(acc.ID)
				var err error
				if ps, err = at.Peers(ctx); err != nil {
					return err
				}
				if pols, err = at.Policies(ctx); err != nil {
					return err
				}
				es, err = at.Events(ctx, 0)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return ps, pols, es
		}
		peers0, pols0, events0 := state()
		pk, _ := key.NewPrivate()
		good := peers.TemporaryInput{Name: "browser-ssh", Key: pk.Public().String(), Rules: []string{"tcp/22", "udp/6000-6010"}}

		// Refused requests store nothing.
		many := make([]string, peers.MaxTemporaryRules+1)
		for i := range many {
			many[i] = "tcp/22"
		}
		for name, in := range map[string]peers.TemporaryInput{
			"empty name":     {Name: "  ", Key: good.Key, Rules: good.Rules},
			"long name":      {Name: string(make([]byte, 64)), Key: good.Key, Rules: good.Rules},
			"symbols name":   {Name: "---", Key: good.Key, Rules: good.Rules},
			"bad key":        {Name: "x", Key: "AAAA", Rules: good.Rules},
			"no rules":       {Name: "x", Key: good.Key, Rules: []string{}},
			"too many":       {Name: "x", Key: good.Key, Rules: many},
			"bad rule":       {Name: "x", Key: good.Key, Rules: []string{"tcp/22", "tcp/99999"}},
			"taken key":      {Name: "x", Key: tk.Public().String(), Rules: good.Rules},
			"missing target": good,
		} {
			to := target.ID
			if name == "missing target" {
				to = "nope"
			}
			_, err := svc.CreateTemporary(ctx, acc.ID, to, in, "admin")
			switch name {
			case "taken key":
				if !errors.Is(err, store.ErrConflict) {
					t.Errorf("%s: %v, want a conflict", name, err)
				}
			case "missing target":
				if !errors.Is(err, store.ErrNotFound) {
					t.Errorf("%s: %v, want not found", name, err)
				}
			default:
				if !errors.Is(err, peers.ErrInvalid) {
					t.Errorf("%s: %v, want ErrInvalid", name, err)
				}
			}
		}
		if ps, pols, es := state(); len(ps) != len(peers0) || len(pols) != len(pols0) || len(es) != len(events0) {
			t.Fatalf("refused requests stored something: %d peers, %d policies, %d events", len(ps), len(pols), len(es))
		}

		tp, err := svc.CreateTemporary(ctx, acc.ID, target.ID, good, "admin")
		if err != nil {
			t.Fatal(err)
		}
		if !tp.Temporary || !tp.Ephemeral || tp.ApprovalRequired || !tp.IP.IsValid() || tp.DNSLabel != "browser-ssh" || tp.UserID != "" {
			t.Fatalf("temporary peer %+v", tp)
		}
		// The key an admin gave the browser client cannot be taken over by
		// a device registering it with a setup key (it would join the
		// temporary peer's account).
		if _, _, err := svc.Login(ctx, peers.LoginInput{Key: pk.Public(), SetupKey: secret, Meta: account.Meta{Hostname: "device"}}); !errors.Is(err, peers.ErrOtherUser) {
			t.Fatalf("setup-key login with a temporary peer's key: %v, want ErrOtherUser", err)
		}
		_, pols, es := state()
		var mine []account.Rule
		for _, p := range pols {
			for _, r := range p.Rules {
				if r.SourcePeer == tp.ID {
					mine = append(mine, account.Rule{Protocol: r.Protocol, Ports: r.Ports, PortRanges: r.PortRanges, SourcePeer: r.SourcePeer,
						DestinationPeer: r.DestinationPeer, Bidirectional: r.Bidirectional, Action: r.Action, Enabled: r.Enabled})
				}
			}
		}
		want := []account.Rule{
			{Protocol: "tcp", Ports: []uint16{22}, SourcePeer: tp.ID, DestinationPeer: target.ID, Action: account.ActionAccept, Enabled: true},
			{Protocol: "udp", PortRanges: []account.PortRange{{Start: 6000, End: 6010}}, SourcePeer: tp.ID, DestinationPeer: target.ID, Action: account.ActionAccept, Enabled: true},
		}
		slices.SortFunc(mine, func(a, b account.Rule) int { return cmpString(a.Protocol, b.Protocol) })
		if d := cmp.Diff(want, mine); d != "" || len(pols) != len(pols0)+2 {
			t.Fatalf("temporary policies: %d policies; rules (-want +got):\n%s", len(pols), d)
		}
		if got := codes(newer(es, events0)); !slices.Equal(got, []string{"peer.user.add", "policy.add", "policy.add"}) {
			t.Fatalf("events of the creation: %v", got)
		}

		// Not yet expired just before the deadline; gone just after.
		clk.add(peers.TemporaryOffline - time.Second)
		if err := svc.ExpireTemporary(ctx); err != nil {
			t.Fatal(err)
		}
		if ps, _, _ := state(); len(ps) != len(peers0)+1 {
			t.Fatalf("temporary peer removed before its deadline: %d peers", len(ps))
		}
		clk.add(2 * time.Second)
		if err := svc.ExpireTemporary(ctx); err != nil {
			t.Fatal(err)
		}
		ps, pols, es2 := state()
		if len(ps) != len(peers0) || len(pols) != len(pols0) {
			t.Fatalf("after the deadline: %d peers, %d policies; want %d and %d", len(ps), len(pols), len(peers0), len(pols0))
		}
		if got := codes(newer(es2, es)); !slices.Equal(got, []string{"policy.delete", "policy.delete", "user.peer.delete"}) {
			t.Fatalf("events of the expiry: %v", got)
		}
		// The target is untouched.
		if !slices.ContainsFunc(ps, func(p account.Peer) bool { return p.ID == target.ID }) {
			t.Fatal("the target went too")
		}
	})
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func codes(es []account.Event) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Activity)
	}
	slices.Sort(out)
	return out
}

// newer is the events of now not in before.
func newer(now, before []account.Event) []account.Event {
	var out []account.Event
	for _, e := range now {
		if !slices.ContainsFunc(before, func(b account.Event) bool { return b.ID == e.ID }) {
			out = append(out, e)
		}
	}
	return out
}

package grpcapi

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/management/peerconns"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/tenant"
)

// TestReportConnsAdmission: a connection report is hostile input from
// any registered peer. Without an open Sync stream here, or before the
// streams loaded the account, it is dropped without reading the account
// or leaving account state in memory (only a stream's end frees that);
// with both, it resolves against the loaded state; a report sent within
// peerconns.MinInterval of the last read one is dropped.
func TestReportConnsAdmission(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Engine: store.SQLite, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tn, err := tenant.Default(ctx, st, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := peerconns.New()
	s := New(Options{Store: st, Conns: tr, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }})
	t.Cleanup(s.Close)

	acc, ps, access := dnsAccount()
	acc.ID = tn.ID
	for i := range ps {
		ps[i].AccountID = tn.ID
	}
	reporter := ps[0]
	report := func(typ peerconns.Type) {
		s.reportConns(ctx, reporter, []peerconns.Entry{{Key: ps[1].Key, Type: typ}})
	}
	noState := func(when string) {
		t.Helper()
		if s.snaps.lookup(tn.ID) != nil {
			t.Fatalf("%s: the report left account state in memory", when)
		}
		if _, ok := tr.Of(tn.ID, reporter.ID); ok {
			t.Fatalf("%s: the report was kept", when)
		}
	}

	report(peerconns.P2P)
	noState("no stream open")

	slot := tr.Open(tn.ID, reporter.ID)
	defer tr.Close(tn.ID, reporter.ID, slot)
	now = now.Add(time.Second)
	report(peerconns.P2P)
	noState("stream open, account not loaded")

	// What a Sync stream's first map loads.
	e := s.snaps.entry(tn.ID)
	e.mu.Lock()
	e.ix, e.loaded = networkmap.NewIndex(acc, ps, access), true
	e.remote = remoteCache{}
	for i := range ps {
		e.remote[ps[i].ID] = newShown(&ps[i], acc.Domain, e.ix.IsV6(ps[i].ID))
	}
	e.mu.Unlock()

	for _, step := range []struct {
		name  string
		after time.Duration
		typ   peerconns.Type
		want  peerconns.Type
	}{
		{"first after loading", time.Second, peerconns.P2P, peerconns.P2P},
		{"too soon", 100 * time.Millisecond, peerconns.Relayed, peerconns.P2P},
		{"still too soon", peerconns.MinInterval - 200*time.Millisecond, peerconns.Relayed, peerconns.P2P},
		{"after the interval", 200 * time.Millisecond, peerconns.Relayed, peerconns.Relayed},
	} {
		now = now.Add(step.after)
		report(step.typ)
		got, ok := tr.Of(tn.ID, reporter.ID)
		if diff := cmp.Diff([]peerconns.Conn{{Peer: ps[1].ID, Type: step.want}}, got); !ok || diff != "" {
			t.Errorf("%s: report kept %v (-want +got):\n%s", step.name, ok, diff)
		}
	}
}

// TestSameMeta: a SyncMeta carrying a connection report rewrites the
// peer only when its metadata changed; one without a hostname is never
// stored (peers.Login ignores it), so it counts as unchanged.
func TestSameMeta(t *testing.T) {
	stored := account.Meta{Hostname: "h", OS: "linux"}
	for _, tc := range []struct {
		name string
		got  account.Meta
		want bool
	}{
		{"same", account.Meta{Hostname: "h", OS: "linux"}, true},
		{"changed", account.Meta{Hostname: "h", OS: "darwin"}, false},
		{"renamed", account.Meta{Hostname: "h2", OS: "linux"}, false},
		{"no hostname", account.Meta{OS: "darwin"}, true},
	} {
		if got := sameMeta(stored, tc.got); got != tc.want {
			t.Errorf("%s: sameMeta = %v, want %v", tc.name, got, tc.want)
		}
	}
}

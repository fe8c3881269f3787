package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// fakeReportEnv drives a connReporter with injected ticks: the test moves
// the connections and streams and sees what is sent, tick by tick.
type fakeReportEnv struct {
	mu                    sync.Mutex
	conns                 []*mgmtpb.WiremeshConnection
	streams               uint64
	fail                  bool
	sent                  [][]*mgmtpb.WiremeshConnection
	inFlight, maxInFlight int
	done                  chan struct{} // one value per send attempt
}

func (f *fakeReportEnv) reporter() *connReporter {
	return &connReporter{
		current: func() []*mgmtpb.WiremeshConnection { f.mu.Lock(); defer f.mu.Unlock(); return f.conns },
		streams: func() uint64 { f.mu.Lock(); defer f.mu.Unlock(); return f.streams },
		send: func(_ context.Context, c []*mgmtpb.WiremeshConnection) error {
			f.mu.Lock()
			f.inFlight++
			f.maxInFlight = max(f.maxInFlight, f.inFlight)
			fail := f.fail
			if !fail {
				f.sent = append(f.sent, c)
			}
			f.inFlight--
			f.mu.Unlock()
			f.done <- struct{}{}
			if fail {
				return errors.New("management unavailable")
			}
			return nil
		},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func conn(k string, t mgmtpb.WiremeshConnection_Type) *mgmtpb.WiremeshConnection {
	return &mgmtpb.WiremeshConnection{WgPubKey: k, Type: t}
}

func TestConnReporterCoalesces(t *testing.T) {
	base := runtime.NumGoroutine()
	f := &fakeReportEnv{done: make(chan struct{}, 16)}
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	handled := make(chan struct{})
	r := f.reporter()
	r.handled = func() { handled <- struct{}{} }
	go func() { defer close(stopped); r.run(ctx, ticks) }()
	// tick sends one tick and reports whether a send was attempted on it.
	tick := func() bool {
		ticks <- time.Time{}
		<-handled
		select {
		case <-f.done:
			return true
		default:
			return false
		}
	}
	p2p, relayed, connecting := mgmtpb.WiremeshConnection_P2P, mgmtpb.WiremeshConnection_RELAYED, mgmtpb.WiremeshConnection_CONNECTING
	set := func(streams uint64, c ...*mgmtpb.WiremeshConnection) {
		f.mu.Lock()
		f.streams, f.conns = streams, c
		f.mu.Unlock()
	}

	set(0, conn("a", p2p))
	if tick() {
		t.Fatal("sent before any Sync stream was open")
	}
	set(1, conn("a", p2p))
	if !tick() {
		t.Fatal("first report not sent once the stream opened")
	}
	if tick() {
		t.Fatal("unchanged report sent again")
	}
	// Many changes between two ticks are one report: the last state.
	set(1, conn("a", connecting), conn("b", connecting))
	set(1, conn("a", relayed), conn("b", p2p))
	if !tick() {
		t.Fatal("changed report not sent")
	}
	// A new Sync stream (management restarted) gets the report again.
	set(2, conn("a", relayed), conn("b", p2p))
	if !tick() {
		t.Fatal("report not sent again on a new stream")
	}
	// A failed send is retried at the next tick.
	f.mu.Lock()
	f.fail = true
	f.mu.Unlock()
	set(2, conn("a", p2p), conn("b", p2p))
	if !tick() {
		t.Fatal("changed report not tried")
	}
	f.mu.Lock()
	f.fail = false
	f.mu.Unlock()
	if !tick() {
		t.Fatal("failed report not retried")
	}

	cancel()
	<-stopped
	f.mu.Lock()
	defer f.mu.Unlock()
	want := [][]*mgmtpb.WiremeshConnection{
		{conn("a", p2p)},
		{conn("a", relayed), conn("b", p2p)},
		{conn("a", relayed), conn("b", p2p)},
		{conn("a", p2p), conn("b", p2p)},
	}
	if len(f.sent) != len(want) {
		t.Fatalf("sent %d reports, want %d: %v", len(f.sent), len(want), f.sent)
	}
	for i := range want {
		if !sameConns(f.sent[i], want[i]) {
			t.Errorf("report %d = %v, want %v", i, f.sent[i], want[i])
		}
	}
	if f.maxInFlight != 1 {
		t.Errorf("%d reports in flight at once, want 1", f.maxInFlight)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left (%d before)", runtime.NumGoroutine(), base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConnType(t *testing.T) {
	for _, tc := range []struct {
		state   string
		relayed bool
		want    mgmtpb.WiremeshConnection_Type
	}{
		{"Connected", false, mgmtpb.WiremeshConnection_P2P},
		{"Connected", true, mgmtpb.WiremeshConnection_RELAYED},
		{"Connecting", true, mgmtpb.WiremeshConnection_CONNECTING},
		{"Idle", false, mgmtpb.WiremeshConnection_CONNECTING},
	} {
		if got := connType(tc.state, tc.relayed); got != tc.want {
			t.Errorf("connType(%q, %v) = %v, want %v", tc.state, tc.relayed, got, tc.want)
		}
	}
}

// TestMetaSendsOrdered: a connection report and a posture answer sent at
// once are serialised, so the last metadata management receives carries
// the newest files. The fake sender holds the connection report (built
// with the older files) until the posture answer has gone, or 300 ms:
// unserialised, the answer would go first and the report, arriving last,
// would put the older files back.
func TestMetaSendsOrdered(t *testing.T) {
	ctx := context.Background()
	var m metaFiles
	base := &mgmtpb.PeerSystemMeta{Hostname: "laptop"}
	older := []*mgmtpb.File{{Path: "/usr/bin/edr"}}
	newer := []*mgmtpb.File{{Path: "/usr/bin/edr", Exist: true, ProcessIsRunning: true}}
	if err := m.sendFiles(ctx, func(context.Context, *mgmtpb.PeerSystemMeta) error { return nil }, base, older); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var got []*mgmtpb.PeerSystemMeta
	inFlight, maxInFlight := 0, 0
	inReport, answered := make(chan struct{}), make(chan struct{})
	send := func(_ context.Context, meta *mgmtpb.PeerSystemMeta) error {
		mu.Lock()
		inFlight++
		maxInFlight = max(maxInFlight, inFlight)
		mu.Unlock()
		report := meta.GetWiremeshConnections() != nil
		if report {
			close(inReport)
			select {
			case <-answered:
			case <-time.After(300 * time.Millisecond):
			}
		}
		mu.Lock()
		got = append(got, meta)
		inFlight--
		mu.Unlock()
		if !report {
			close(answered)
		}
		return nil
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := m.sendConns(ctx, send, base, []*mgmtpb.WiremeshConnection{conn("peer-a", mgmtpb.WiremeshConnection_P2P)}); err != nil {
			t.Error(err)
		}
	}()
	go func() {
		defer wg.Done()
		<-inReport // the report is built and on its way
		if err := m.sendFiles(ctx, send, base, newer); err != nil {
			t.Error(err)
		}
	}()
	wg.Wait()

	if len(got) != 2 {
		t.Fatalf("%d metadata sent, want 2", len(got))
	}
	if maxInFlight != 1 {
		t.Errorf("%d metadata sends at once, want 1", maxInFlight)
	}
	last := got[1]
	if len(last.GetFiles()) != 1 || !proto.Equal(last.GetFiles()[0], newer[0]) {
		t.Errorf("last metadata received carries files %v, want the newest answer %v", last.GetFiles(), newer)
	}
	if base.GetFiles() != nil || base.GetWiremeshConnections() != nil {
		t.Errorf("the engine's base metadata was changed: %v", base)
	}
	// A later report carries the newest answer.
	var after *mgmtpb.PeerSystemMeta
	if err := m.sendConns(ctx, func(_ context.Context, meta *mgmtpb.PeerSystemMeta) error { after = meta; return nil }, base, nil); err != nil {
		t.Fatal(err)
	}
	if len(after.GetFiles()) != 1 || !proto.Equal(after.GetFiles()[0], newer[0]) {
		t.Errorf("later report carries files %v, want %v", after.GetFiles(), newer)
	}
}

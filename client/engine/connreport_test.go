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

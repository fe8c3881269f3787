package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/wiremesh/wiremesh/internal/grpcserver"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/testnats"
	"github.com/wiremesh/wiremesh/proto/signalpb"
	"github.com/wiremesh/wiremesh/signal/natsbus"
	sig "github.com/wiremesh/wiremesh/signal/server"
)

// TestBenchSignal opens 10,000 signal streams and relays messages between
// pairs of them at fixed offered rates, first on one instance, then on two
// instances joined through NATS with every pair split across them (each
// message crosses). At each rate it reports what arrived and the latency;
// the one-instance run is the baseline of the ratio.
func TestBenchSignal(t *testing.T) {
	requireBench(t)
	const streams, conns = 10000, 50
	rates := []int{2000, 5000, 10000, 20000}
	_, url := testnats.Start(t)
	one := runSignalLoad(t, streams, conns, 1, "", rates)
	two := runSignalLoad(t, streams, conns, 2, url, rates)
	var report []string
	for i, r := range rates {
		report = append(report, fmt.Sprintf("signal: %d streams, %d msg/s offered: one instance delivers %.0f/s p50 %v p99 %v; two via NATS (all cross) %.0f/s p50 %v p99 %v",
			streams, r, one[i].rate, one[i].p50, one[i].p99, two[i].rate, two[i].p50, two[i].p99))
	}
	report = append(report, fmt.Sprintf("RATIO signal p99 at %d msg/s, two instances via NATS / one instance: %.2f", rates[1], float64(two[1].p99)/float64(one[1].p99)))
	for _, l := range report {
		t.Log(l)
	}
	appendReport(t, report)
}

type signalLoad struct {
	rate     float64
	p50, p99 time.Duration
}

func runSignalLoad(t *testing.T, streams, conns, instances int, natsURL string, rates []int) []signalLoad {
	log := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var clients []*grpc.ClientConn
	var addrs []string
	for i := range instances {
		o := sig.Options{Log: log}
		if natsURL != "" {
			bus, err := natsbus.Dial(natsURL, fmt.Sprintf("bench-%d", i), log)
			if err != nil {
				t.Fatal(err)
			}
			defer bus.Close()
			o.Bus = bus
		}
		s := sig.New(o)
		defer s.Close()
		g := grpcserver.New()
		s.Register(g)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); _ = grpcserver.Serve(ctx, ln, g, http.NotFoundHandler(), log, time.Second) }()
		defer func() { cancel(); <-done }()
		addrs = append(addrs, ln.Addr().String())
	}
	for i := range conns {
		c, err := grpc.NewClient(addrs[i%instances], grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	type stream struct {
		pub string
		st  grpc.BidiStreamingClient[signalpb.EncryptedMessage, signalpb.EncryptedMessage]
	}
	ss := make([]stream, streams)
	var (
		received atomic.Int64
		latMu    sync.Mutex
		lats     []time.Duration
		wg       sync.WaitGroup
	)
	for i := range ss {
		k, _ := key.NewPrivate()
		ss[i].pub = k.Public().String()
		// Stream i is on instance i%instances: with two instances, i and
		// its partner i^1 are on different ones.
		c := clients[(i%instances)+instances*((i/instances)%(conns/instances))]
		sctx := metadata.AppendToOutgoingContext(ctx, sig.HeaderPeerID, ss[i].pub)
		st, err := signalpb.NewSignalExchangeClient(c).ConnectStream(sctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Header(); err != nil {
			t.Fatal(err)
		}
		ss[i].st = st
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := st.Recv()
				if err != nil {
					return
				}
				received.Add(1)
				if len(m.GetBody()) >= 8 {
					d := time.Since(time.Unix(0, int64(binary.BigEndian.Uint64(m.GetBody()))))
					latMu.Lock()
					lats = append(lats, d)
					latMu.Unlock()
				}
			}
		}()
	}
	// Senders own disjoint slices of the streams (a stream's Send is not
	// safe for concurrent use); each message goes to the stream's partner.
	const senders = 200
	load := func(d time.Duration, perSecond int) int64 {
		start := received.Load()
		stop := time.Now().Add(d)
		var sw sync.WaitGroup
		for w := range senders {
			sw.Add(1)
			go func() {
				defer sw.Done()
				body := make([]byte, 256)
				tick := time.NewTicker(time.Duration(int64(time.Second) * senders / int64(perSecond)))
				defer tick.Stop()
				for n := w; time.Now().Before(stop); n += senders {
					i := n % streams
					binary.BigEndian.PutUint64(body, uint64(time.Now().UnixNano()))
					m := &signalpb.EncryptedMessage{Key: ss[i].pub, RemoteKey: ss[i^1].pub, Body: append([]byte(nil), body...)}
					if err := ss[i].st.Send(m); err != nil {
						return
					}
					<-tick.C
				}
			}()
		}
		sw.Wait()
		got := received.Load() - start
		// Let the backlog drain before anything else is measured.
		for last := int64(-1); received.Load() != last; time.Sleep(300 * time.Millisecond) {
			last = received.Load()
		}
		return got
	}
	const secs = 3
	var out []signalLoad
	for _, r := range rates {
		latMu.Lock()
		lats = lats[:0]
		latMu.Unlock()
		got := load(secs*time.Second, r)
		latMu.Lock()
		sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
		if len(lats) == 0 {
			t.Fatal("no message arrived")
		}
		out = append(out, signalLoad{rate: float64(got) / secs,
			p50: lats[len(lats)/2].Round(10 * time.Microsecond), p99: lats[len(lats)*99/100].Round(10 * time.Microsecond)})
		latMu.Unlock()
	}
	for i := range ss {
		_ = ss[i].st.CloseSend()
	}
	cancel()
	wg.Wait()
	return out
}

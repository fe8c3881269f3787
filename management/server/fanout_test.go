package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Peers joining and leaving from several goroutines at once while maps go
// out under a send budget of a few maps: no stream ever gets an older map after a newer
// one, and every stream, official or delta, quick or not reading at all
// until the end, converges to the final set of peers.
func TestFanoutUnderConcurrentChanges(t *testing.T) {
	engines.Each(t, testFanoutUnderConcurrentChanges)
}

func testFanoutUnderConcurrentChanges(t *testing.T, eng storetest.Engine) {
	// A budget of about one map: streams take turns, and the client that
	// does not read holds its share while the others go on.
	e := startOn(t, eng, server.Options{SendBudget: 16 << 10})
	_, secret := e.setupKey(setupkey.Options{Reusable: true})
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	alive := map[key.Public]bool{}
	join := func(conn *grpc.ClientConn, name string, deltas bool) *testpeer.Peer {
		p := testpeer.New(conn, name)
		p.Deltas = deltas
		if _, err := p.Login(c, secret); err != nil {
			t.Error(err)
			return nil
		}
		mu.Lock()
		alive[p.Public()] = true
		mu.Unlock()
		return p
	}
	type watcher struct {
		p *testpeer.Peer
		s *testpeer.Stream
	}
	var ws []watcher
	for i := range 6 {
		p := join(e.conn, fmt.Sprint("w", i), i%3 == 0)
		s, err := p.Sync(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		ws = append(ws, watcher{p, s})
	}
	// A client that reads nothing until the changes are over, on its own
	// connection with fixed 64 KiB windows.
	slowConn, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer slowConn.Close()
	slow := join(slowConn, "slow", false)
	req, sh, err := slow.Seal(c, &mgmtpb.SyncRequest{Meta: slow.Meta()})
	if err != nil {
		t.Fatal(err)
	}
	slowStream, err := mgmtpb.NewManagementServiceClient(slowConn).Sync(c, req)
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 6 {
				p := join(e.conn, fmt.Sprintf("j%d-%d", g, i), false)
				if p == nil || i%2 == 0 {
					continue
				}
				if err := p.Logout(c); err != nil {
					t.Error(err)
					continue
				}
				mu.Lock()
				delete(alive, p.Public())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	others := func(self key.Public) []key.Public {
		var ks []key.Public
		for k := range alive {
			if k != self {
				ks = append(ks, k)
			}
		}
		return ks
	}
	for _, w := range ws {
		want := others(w.p.Public())
		if err := w.s.WaitFor(40*time.Second, func([]*mgmtpb.SyncResponse) bool { return testpeer.HasPeers(w.s.LatestMap(), want...) }); err != nil {
			t.Fatalf("%s did not converge to the final %d peers: has %d", w.p.Hostname, len(want), len(w.s.LatestMap().GetRemotePeers()))
		}
		var last uint64
		for i, r := range w.s.Raw() {
			serial := r.GetNetworkMap().GetSerial()
			if d := r.GetWiremeshDelta(); d != nil {
				serial = d.GetSerial()
			}
			if serial == 0 {
				continue // an empty response or a config refresh
			}
			if serial <= last {
				t.Fatalf("%s: response %d has serial %d after %d", w.p.Hostname, i, serial, last)
			}
			last = serial
		}
	}
	want := others(slow.Public())
	var last uint64
	for n := 0; ; n++ {
		m, err := slowStream.Recv()
		if err != nil {
			t.Fatalf("slow stream after %d maps: %v", n, err)
		}
		var r mgmtpb.SyncResponse
		if err := sh.OpenProto(m.GetBody(), &r); err != nil {
			t.Fatal(err)
		}
		nm := r.GetNetworkMap()
		if nm.GetSerial() <= last {
			t.Fatalf("slow stream: map %d has serial %d after %d", n, nm.GetSerial(), last)
		}
		last = nm.GetSerial()
		if testpeer.HasPeers(nm, want...) {
			break
		}
	}
}

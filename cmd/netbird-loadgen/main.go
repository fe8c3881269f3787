// Command netbird-loadgen loads a management server that speaks NetBird's
// protocol with N simulated peers: real keys, the real envelope, real gRPC
// Login and Sync streams, no WireGuard. It measures the login rate, the
// time until every peer has its first map, and the fan-out of one change
// (a peer joining) to every stream: latency p50/p99 and bytes per update.
// With --server-pid it adds the server's RSS and CPU time. It deregisters
// its peers afterwards unless told to keep them. Point it at any server of
// the protocol (ours or NetBird's) to compare them.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

type options struct {
	url, setupKey      string
	peers, concurrency int
	perConn, serverPID int
	asJSON, keep, row  bool
	deltas             bool
	timeout            time.Duration
}

// Result is what one run prints.
type Result struct {
	Peers            int     `json:"peers"`
	LoginPerSecond   float64 `json:"login_per_second"`
	FirstMapSeconds  float64 `json:"first_map_seconds"`
	FanoutP50Ms      float64 `json:"fanout_p50_ms"`
	FanoutP99Ms      float64 `json:"fanout_p99_ms"`
	FanoutReached    int     `json:"fanout_reached"`
	BytesPerUpdate   float64 `json:"bytes_per_update"`
	ServerRSSMB      float64 `json:"server_rss_mb,omitempty"`
	ServerCPUSeconds float64 `json:"server_cpu_seconds,omitempty"`
	// JoinCPUSeconds is the server's CPU time from the join until every
	// stream had it (with --server-pid).
	JoinCPUSeconds float64 `json:"join_cpu_seconds,omitempty"`
	// Accounts the peers are spread over (one per setup key); the join's
	// fan-out is measured in the first, and OtherAccountBytes is what
	// streams of the others received meanwhile (must be 0).
	Accounts          int   `json:"accounts"`
	OtherAccountBytes int64 `json:"other_account_bytes"`
}

func main() {
	var o options
	flag.StringVar(&o.url, "m", "", "management URL, e.g. http://127.0.0.1:33073 (required)")
	flag.StringVar(&o.setupKey, "k", "", "reusable setup key (required); several, comma-separated, spread the peers over their accounts (the join happens in the first)")
	flag.IntVar(&o.peers, "peers", 100, "simulated peers")
	flag.IntVar(&o.concurrency, "concurrency", 32, "logins in flight")
	flag.IntVar(&o.perConn, "streams-per-conn", 100, "Sync streams per gRPC connection")
	flag.IntVar(&o.serverPID, "server-pid", 0, "server process to report RSS and CPU seconds of (Linux /proc)")
	flag.BoolVar(&o.asJSON, "json", false, "print one JSON object")
	flag.BoolVar(&o.keep, "keep", false, "leave the peers registered")
	flag.BoolVar(&o.deltas, "deltas", false, "ask for network map deltas, as the wiremesh agent does (a server without them sends whole maps)")
	flag.BoolVar(&o.row, "row", false, "with --json: also print a table row on stderr (peers, logins/s, first maps s, fan-out p50/p99 ms, bytes, RSS MB, CPU s)")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up after this long")
	flag.Parse()
	if o.url == "" || o.setupKey == "" || o.peers < 1 {
		fmt.Fprintln(os.Stderr, "usage: netbird-loadgen -m URL -k SETUPKEY --peers N [--server-pid PID] [--json] [--keep]")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	r, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	if o.asJSON {
		_ = json.NewEncoder(os.Stdout).Encode(r)
		if o.row {
			fmt.Fprintf(os.Stderr, "%-7d %10.0f %12.2f %12.0f %12.0f %14.0f %10.0f %10.1f %10.1f\n", r.Peers, r.LoginPerSecond, r.FirstMapSeconds,
				r.FanoutP50Ms, r.FanoutP99Ms, r.BytesPerUpdate, r.ServerRSSMB, r.ServerCPUSeconds, r.JoinCPUSeconds)
		}
		return
	}
	fmt.Printf("peers %d: %.0f logins/s, all first maps in %.2f s, one join reached %d streams: p50 %.1f ms, p99 %.1f ms, %.0f bytes per stream",
		r.Peers, r.LoginPerSecond, r.FirstMapSeconds, r.FanoutReached, r.FanoutP50Ms, r.FanoutP99Ms, r.BytesPerUpdate)
	if o.serverPID != 0 {
		fmt.Printf(", server %.0f MB RSS, %.1f CPU s", r.ServerRSSMB, r.ServerCPUSeconds)
	}
	fmt.Println()
}

// client is one simulated peer.
type client struct {
	priv key.Private
	api  mgmtpb.ManagementServiceClient
	sh   *envelope.Shared
	host string
	// deltas: the peer asks for network map deltas.
	deltas bool
	key    string // setup key it registers with

	firstMap atomic.Int64 // unix ns of the first map
	sawProbe atomic.Int64 // unix ns of the first map listing the probe
	bytes    atomic.Int64 // bytes received after the probe joined
}

func dial(rawURL string) (*grpc.ClientConn, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("management URL %q: want http(s)://host:port", rawURL)
	}
	creds := insecure.NewCredentials()
	if u.Scheme == "https" {
		creds = credentials.NewTLS(&tls.Config{NextProtos: []string{"h2"}})
	}
	return grpc.NewClient(u.Host, grpc.WithTransportCredentials(creds), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
}

func newClient(ctx context.Context, conn *grpc.ClientConn, i int) (*client, error) {
	priv, err := key.NewPrivate()
	if err != nil {
		return nil, err
	}
	c := &client{priv: priv, api: mgmtpb.NewManagementServiceClient(conn), host: "loadgen-" + strconv.Itoa(i)}
	sk, err := c.api.GetServerKey(ctx, &mgmtpb.Empty{})
	if err != nil {
		return nil, fmt.Errorf("server key: %w", err)
	}
	pub, err := key.ParsePublic(sk.GetKey())
	if err != nil {
		return nil, err
	}
	c.sh = envelope.NewShared(priv, pub)
	return c, nil
}

func (c *client) meta() *mgmtpb.PeerSystemMeta {
	return &mgmtpb.PeerSystemMeta{Hostname: c.host, GoOS: "linux", Kernel: "Linux", NetbirdVersion: "0.77.1", SyncMessageVersion: 1}
}

func (c *client) seal(m proto.Message) (*mgmtpb.EncryptedMessage, error) {
	b, err := c.sh.SealProto(m)
	if err != nil {
		return nil, err
	}
	return &mgmtpb.EncryptedMessage{WgPubKey: c.priv.Public().String(), Body: b}, nil
}

func (c *client) login(ctx context.Context) error {
	setupKey := c.key
	msg, err := c.seal(&mgmtpb.LoginRequest{SetupKey: strings.ToLower(setupKey), Meta: c.meta(),
		PeerKeys: &mgmtpb.PeerKeys{WgPubKey: []byte(c.priv.Public().String())}})
	if err != nil {
		return err
	}
	_, err = c.api.Login(ctx, msg)
	return err
}

func (c *client) logout(ctx context.Context) error {
	msg, err := c.seal(&mgmtpb.Empty{})
	if err != nil {
		return err
	}
	_, err = c.api.Logout(ctx, msg)
	return err
}

// sync follows the stream, recording when maps arrive, until ctx ends.
func (c *client) sync(ctx context.Context, probe *atomic.Pointer[string]) error {
	req := &mgmtpb.SyncRequest{Meta: c.meta()}
	if c.deltas {
		req.WiremeshCapabilities = &mgmtpb.WiremeshCapabilities{NetworkMapDeltas: true, DerivedPeerDNS: true}
	}
	msg, err := c.seal(req)
	if err != nil {
		return err
	}
	st, err := c.api.Sync(ctx, msg)
	if err != nil {
		return err
	}
	for {
		m, err := st.Recv()
		if err != nil {
			return err
		}
		now := time.Now().UnixNano()
		p := probe.Load()
		if p != nil {
			c.bytes.Add(int64(proto.Size(m)))
		}
		plain, err := c.sh.Open(m.GetBody())
		if err != nil {
			return err
		}
		want := ""
		if p != nil && c.sawProbe.Load() == 0 {
			want = *p
		}
		isMap, listed, err := scan(plain, want)
		if err != nil {
			return err
		}
		if !isMap {
			continue
		}
		c.firstMap.CompareAndSwap(0, now)
		if listed {
			c.sawProbe.Store(now)
		}
	}
}

func run(ctx context.Context, o options) (Result, error) {
	keys := strings.Split(o.setupKey, ",")
	res := Result{Peers: o.peers, Accounts: len(keys)}
	var conns []*grpc.ClientConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	clients := make([]*client, o.peers+1) // the last one is the probe
	for i := range clients {
		if i%o.perConn == 0 {
			cc, err := dial(o.url)
			if err != nil {
				return res, err
			}
			conns = append(conns, cc)
		}
		c, err := newClient(ctx, conns[len(conns)-1], i)
		if err != nil {
			return res, err
		}
		c.deltas = o.deltas
		c.key = keys[i%len(keys)]
		clients[i] = c
	}
	peers, probe := clients[:o.peers], clients[o.peers]
	probe.key = keys[0]
	// The probe's account: the streams its join must reach.
	var inAcc, others []*client
	for i, c := range peers {
		if i%len(keys) == 0 {
			inAcc = append(inAcc, c)
		} else {
			others = append(others, c)
		}
	}

	// Logins, o.concurrency at a time.
	start := time.Now()
	if err := each(ctx, peers, o.concurrency, func(c *client) error { return c.login(ctx) }); err != nil {
		return res, fmt.Errorf("login: %w", err)
	}
	res.LoginPerSecond = float64(o.peers) / time.Since(start).Seconds()
	if !o.keep {
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_ = each(cctx, clients, o.concurrency, func(c *client) error { _ = c.logout(cctx); return nil })
		}()
	}

	// Every peer opens its stream; wait for all first maps.
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	var probeKey atomic.Pointer[string]
	start = time.Now()
	errs := make(chan error, len(peers))
	for _, c := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Like the official client (SPEC-wire: 1 s, x1.7, at most
			// 15 s): a server turning away a storm of streams
			// (ResourceExhausted) or restarting is retried.
			backoff := time.Second
			for {
				err := c.sync(sctx, &probeKey)
				if sctx.Err() != nil {
					return
				}
				if code := status.Code(err); code != codes.ResourceExhausted && code != codes.Unavailable {
					errs <- err
					return
				}
				select {
				case <-sctx.Done():
					return
				case <-time.After(backoff/2 + time.Duration(rand.Int64N(int64(backoff)))):
				}
				backoff = min(backoff*17/10, 15*time.Second)
			}
		}()
	}
	if err := waitAll(ctx, errs, func() bool {
		for _, c := range peers {
			if c.firstMap.Load() == 0 {
				return false
			}
		}
		return true
	}); err != nil {
		return res, fmt.Errorf("first maps: %w", err)
	}
	res.FirstMapSeconds = time.Since(start).Seconds()

	// One change: the probe joins; measure until every stream lists it.
	time.Sleep(500 * time.Millisecond) // let the stragglers' maps settle
	k := probe.priv.Public().String()
	var cpuBefore float64
	if o.serverPID != 0 {
		_, cpuBefore = procStats(o.serverPID)
	}
	probeKey.Store(&k)
	joined := time.Now()
	if err := probe.login(ctx); err != nil {
		return res, fmt.Errorf("probe login: %w", err)
	}
	fctx, fcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer fcancel()
	_ = waitAll(fctx, errs, func() bool {
		for _, c := range inAcc {
			if c.sawProbe.Load() == 0 {
				return false
			}
		}
		return true
	})
	if o.serverPID != 0 {
		_, cpu := procStats(o.serverPID)
		res.JoinCPUSeconds = cpu - cpuBefore
	}
	var lat []float64
	var bytes int64
	for _, c := range inAcc {
		if at := c.sawProbe.Load(); at != 0 {
			lat = append(lat, float64(at-joined.UnixNano())/1e6)
		}
		bytes += c.bytes.Load()
	}
	if len(others) > 0 {
		time.Sleep(500 * time.Millisecond) // anything leaking would be on its way
		for _, c := range others {
			res.OtherAccountBytes += c.bytes.Load()
		}
	}
	res.FanoutReached = len(lat)
	if len(lat) > 0 {
		sort.Float64s(lat)
		res.FanoutP50Ms = lat[len(lat)*50/100]
		res.FanoutP99Ms = lat[min(len(lat)-1, len(lat)*99/100)]
		res.BytesPerUpdate = float64(bytes) / float64(len(inAcc))
	}
	if o.serverPID != 0 {
		res.ServerRSSMB, res.ServerCPUSeconds = procStats(o.serverPID)
	}
	if res.FanoutReached < len(inAcc) {
		return res, fmt.Errorf("the join reached %d of %d streams within 2 minutes", res.FanoutReached, len(inAcc))
	}
	if res.OtherAccountBytes > 0 {
		return res, fmt.Errorf("a join in one account sent %d bytes to streams of other accounts", res.OtherAccountBytes)
	}
	return res, nil
}

// each runs fn for every client, n at a time, stopping at the first error.
func each(ctx context.Context, cs []*client, n int, fn func(*client) error) error {
	sem := make(chan struct{}, max(n, 1))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, c := range cs {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(c); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// waitAll polls done until it holds, a stream fails or ctx ends.
func waitAll(ctx context.Context, errs <-chan error, done func() bool) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !done() {
		select {
		case err := <-errs:
			return err
		case <-ctx.Done():
			return errors.New("timed out")
		case <-t.C:
		}
	}
	return nil
}

// procStats reads a process's resident memory (MB) and CPU time (s).
func procStats(pid int) (rssMB, cpuS float64) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				rssMB = kb / 1024
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 {
			f := strings.Fields(s[i+1:])
			if len(f) > 13 {
				ut, _ := strconv.ParseFloat(f[11], 64)
				st, _ := strconv.ParseFloat(f[12], 64)
				cpuS = (ut + st) / 100 // USER_HZ
			}
		}
	}
	return rssMB, cpuS
}

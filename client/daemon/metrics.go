package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/wiremesh/wiremesh/internal/metrics"
)

// Metrics describes the agent for Prometheus: its session, its peers by
// state and by connection type with the ICE candidate types of the
// selected pair, relays and traffic.
func (s *Server) Metrics() []metrics.Sample {
	s.mu.Lock()
	e, needsLogin := s.eng, s.needsLogin
	s.mu.Unlock()
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	out := []metrics.Sample{
		{Name: "agent_up", Help: "1 while a session runs", Kind: metrics.Gauge, Value: b(e != nil)},
		{Name: "agent_needs_login", Help: "1 when the server wants a new login", Kind: metrics.Gauge, Value: b(e == nil && needsLogin)},
	}
	if e == nil {
		return out
	}
	st := e.Status()
	out = append(out,
		metrics.Sample{Name: "agent_management_connected", Help: "1 while the management stream is open", Kind: metrics.Gauge, Value: b(st.MgmtConnected)},
		metrics.Sample{Name: "agent_signal_connected", Help: "1 while the signal stream is open", Kind: metrics.Gauge, Value: b(st.SignalConn)})
	states := map[string]int{"Idle": 0, "Connecting": 0, "Connected": 0}
	pairs := map[string]int{}
	var rx, tx int64
	for _, p := range st.Peers {
		states[p.Conn.State]++
		if p.Conn.State == "Connected" {
			kind := "p2p"
			if p.Conn.Relayed {
				kind = "relayed"
			}
			pairs[fmt.Sprintf(`type=%q,local=%q,remote=%q`, kind, p.Conn.LocalType, p.Conn.RemoteType)]++
		}
		rx += p.RxBytes
		tx += p.TxBytes
	}
	for _, state := range []string{"Idle", "Connecting", "Connected"} {
		out = append(out, metrics.Sample{Name: "agent_peers", Help: "remote peers by connection state", Kind: metrics.Gauge,
			Labels: fmt.Sprintf("state=%q", state), Value: float64(states[state])})
	}
	for labels, n := range pairs {
		out = append(out, metrics.Sample{Name: "agent_peer_connections", Help: "connected peers by path and ICE candidate types",
			Kind: metrics.Gauge, Labels: labels, Value: float64(n)})
	}
	avail := 0
	for _, r := range st.Relays {
		if r.Available {
			avail++
		}
	}
	out = append(out,
		metrics.Sample{Name: "agent_relays_available", Help: "relays this agent is connected to", Kind: metrics.Gauge, Value: float64(avail)},
		metrics.Sample{Name: "agent_received_bytes", Help: "WireGuard bytes received from current peers", Kind: metrics.Gauge, Value: float64(rx)},
		metrics.Sample{Name: "agent_sent_bytes", Help: "WireGuard bytes sent to current peers", Kind: metrics.Gauge, Value: float64(tx)})
	return out
}

// serveMetrics serves /metrics on addr until ctx ends.
func (s *Server) serveMetrics(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listener on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(s.Metrics))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	s.log.Info("metrics listening", "addr", ln.Addr().String())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

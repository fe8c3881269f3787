package server

import (
	"fmt"
	"io"
	"net/http"
)

// WriteMetrics writes the relay's counters in the Prometheus text format.
func (s *Server) WriteMetrics(w io.Writer) {
	st := s.Stats()
	for _, m := range []struct {
		name, kind, help string
		v                int64
	}{
		{"relay_connections", "gauge", "authenticated peer connections", s.m.connections.Load()},
		{"relay_subscriptions", "gauge", "peer-state subscriptions held", int64(st.OfflineWatches)},
		{"relay_accepted_total", "counter", "transport connections accepted", s.m.accepted.Load()},
		{"relay_auth_failures_total", "counter", "connections refused at auth", s.m.authFailures.Load()},
		{"relay_forwarded_messages_total", "counter", "transport messages forwarded", s.m.forwarded.Load()},
		{"relay_forwarded_bytes_total", "counter", "bytes of forwarded transport messages", s.m.bytes.Load()},
		{"relay_dropped_no_peer_total", "counter", "transport messages for a peer not connected here", s.m.droppedNoPeer.Load()},
		{"relay_dropped_queue_full_total", "counter", "transport messages dropped at a full send queue", s.m.droppedQueue.Load()},
		{"relay_dropped_rate_limited_total", "counter", "transport messages over the sender's rate limit", s.m.droppedLimited.Load()},
		{"relay_dropped_malformed_total", "counter", "malformed transport messages", s.m.dropped.Load()},
		{"relay_health_dropped_total", "counter", "peers dropped for not answering health checks", s.m.healthDropped.Load()},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %d\n", m.name, m.help, m.name, m.kind, m.name, m.v)
	}
}

// MetricsHandler serves WriteMetrics.
func (s *Server) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		s.WriteMetrics(w)
	})
}

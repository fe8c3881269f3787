package server

import (
	"net/http"

	"github.com/wiremesh/wiremesh/internal/metrics"
)

// Metrics are the relay's counters.
func (s *Server) Metrics() []metrics.Sample {
	st := s.Stats()
	c := func(name, help string, v int64) metrics.Sample {
		return metrics.Sample{Name: name, Help: help, Kind: metrics.Counter, Value: float64(v)}
	}
	return []metrics.Sample{
		{Name: "relay_connections", Help: "authenticated peer connections", Kind: metrics.Gauge, Value: float64(s.m.connections.Load())},
		{Name: "relay_subscriptions", Help: "peer-state subscriptions held", Kind: metrics.Gauge, Value: float64(st.OfflineWatches)},
		c("relay_accepted_total", "transport connections accepted", s.m.accepted.Load()),
		c("relay_auth_failures_total", "connections refused at auth", s.m.authFailures.Load()),
		c("relay_forwarded_messages_total", "transport messages forwarded", s.m.forwarded.Load()),
		c("relay_forwarded_bytes_total", "bytes of forwarded transport messages", s.m.bytes.Load()),
		c("relay_dropped_no_peer_total", "transport messages for a peer not connected here", s.m.droppedNoPeer.Load()),
		c("relay_dropped_queue_full_total", "transport messages dropped at a full send queue", s.m.droppedQueue.Load()),
		c("relay_dropped_rate_limited_total", "transport messages over the sender's rate limit", s.m.droppedLimited.Load()),
		c("relay_dropped_malformed_total", "malformed transport messages", s.m.dropped.Load()),
		c("relay_health_dropped_total", "peers dropped for not answering health checks", s.m.healthDropped.Load()),
	}
}

// MetricsHandler serves the relay's metrics in the Prometheus format.
func (s *Server) MetricsHandler() http.Handler { return metrics.Handler(s.Metrics) }

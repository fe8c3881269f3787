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
		{Name: "relay_subscriptions", Help: "peer-state subscriptions held", Kind: metrics.Gauge, Value: float64(st.Subscriptions)},
		{Name: "relay_subscriptions_limit", Help: "cap of subscriptions over all peers (per peer: relay_subscriptions_per_peer_limit)", Kind: metrics.Gauge, Value: float64(s.o.MaxSubscriptions)},
		{Name: "relay_subscriptions_per_peer_limit", Help: "cap of subscriptions of one peer", Kind: metrics.Gauge, Value: float64(s.o.MaxSubscriptionsPerPeer)},
		{Name: "relay_handshakes", Help: "connections not yet authenticated", Kind: metrics.Gauge, Value: float64(st.Handshakes)},
		{Name: "relay_handshakes_limit", Help: "cap of connections not yet authenticated (per source address: relay_handshakes_per_source_limit)", Kind: metrics.Gauge, Value: float64(s.o.MaxHandshakes)},
		{Name: "relay_handshakes_per_source_limit", Help: "cap of connections not yet authenticated from one address", Kind: metrics.Gauge, Value: float64(s.o.MaxHandshakesPerSource)},
		{Name: "relay_queued_bytes", Help: "bytes in all send queues", Kind: metrics.Gauge, Value: float64(st.QueuedBytes)},
		{Name: "relay_queued_bytes_limit", Help: "cap of bytes in all send queues (per peer: relay_queued_bytes_per_peer_limit)", Kind: metrics.Gauge, Value: float64(s.o.QueueBytes)},
		{Name: "relay_queued_bytes_per_peer_limit", Help: "cap of bytes in one peer's send queue", Kind: metrics.Gauge, Value: float64(s.o.QueueBytesPerPeer)},
		c("relay_accepted_total", "transport connections accepted", s.m.accepted.Load()),
		c("relay_auth_failures_total", "connections refused at auth", s.m.authFailures.Load()),
		c("relay_forwarded_messages_total", "transport messages forwarded", s.m.forwarded.Load()),
		c("relay_forwarded_bytes_total", "bytes of forwarded transport messages", s.m.bytes.Load()),
		c("relay_dropped_no_peer_total", "transport messages for a peer not connected here", s.m.droppedNoPeer.Load()),
		c("relay_dropped_queue_full_total", "transport messages dropped at a full send queue", s.m.droppedQueue.Load()),
		c("relay_dropped_queue_bytes_total", "transport messages dropped at a send queue's (or all queues') byte cap", s.m.droppedQueueBytes.Load()),
		c("relay_subscriptions_refused_total", "subscriptions refused at the per-peer or overall cap", s.m.subsRefused.Load()),
		c("relay_handshakes_refused_total", "connections closed unauthenticated at the handshake caps", s.m.handshakesRefused.Load()),
		c("relay_auth_token_other_peer_total", "auths refused: token bound to another peer ID", s.m.tokensOtherPeer.Load()),
		c("relay_auth_token_unbound_total", "auths refused: token bound to no peer ID", s.m.tokensUnbound.Load()),
		c("relay_dropped_rate_limited_total", "transport messages over the sender's rate limit", s.m.droppedLimited.Load()),
		c("relay_dropped_malformed_total", "malformed transport messages", s.m.dropped.Load()),
		c("relay_health_dropped_total", "peers dropped for not answering health checks", s.m.healthDropped.Load()),
	}
}

// MetricsHandler serves the relay's metrics in the Prometheus format.
func (s *Server) MetricsHandler() http.Handler { return metrics.Handler(s.Metrics) }

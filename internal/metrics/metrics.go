// Package metrics writes counters and gauges in the Prometheus text
// exposition format, for the /metrics endpoints of the servers, without a
// client library: the servers keep their own atomic counters and list them
// here when scraped.
package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Kind is the Prometheus metric type.
type Kind string

// Kinds.
const (
	Counter Kind = "counter"
	Gauge   Kind = "gauge"
)

// Sample is one metric's current value.
type Sample struct {
	Name, Help string
	Kind       Kind
	Value      float64
	// Labels, when set, are the series' labels as written between the
	// braces (`type="p2p"`); samples of one name must be adjacent.
	Labels string
}

// Write prints samples.
func Write(w io.Writer, samples []Sample) {
	prev := ""
	for _, s := range samples {
		if s.Name != prev {
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", s.Name, s.Help, s.Name, s.Kind)
			prev = s.Name
		}
		if s.Labels != "" {
			fmt.Fprintf(w, "%s{%s} %g\n", s.Name, s.Labels, s.Value)
		} else {
			fmt.Fprintf(w, "%s %g\n", s.Name, s.Value)
		}
	}
}

// Handler serves what the sources report, in order.
func Handler(sources ...func() []Sample) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		for _, src := range sources {
			Write(w, src())
		}
	})
}

// Health serves /healthz: 200 {"status":"ok"} when check passes, 503 with
// the error otherwise. check may be nil (the process answering is enough).
func Health(check func(ctx context.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if check != nil {
			if err := check(r.Context()); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				_ = json.NewEncoder(w).Encode(map[string]string{"status": "unhealthy", "error": err.Error()})
				return
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "ok"})
	})
}

package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// FlagUsage describes the servers' --metrics-addr flag.
const FlagUsage = "address serving Prometheus /metrics on a listener of its own, e.g. 127.0.0.1:9090 (NetBird's port); empty: not served. Keep it off public interfaces (env NB_METRICS_ADDR)"

// Endpoint serves /metrics on its own listener, apart from the public
// port, so that counters are not published to the Internet.
type Endpoint struct {
	ln  net.Listener
	srv *http.Server
	wg  sync.WaitGroup
}

// Listen serves h at /metrics on addr until Close. addr "" returns a nil
// Endpoint, whose methods do nothing.
func Listen(addr string, h http.Handler, log *slog.Logger) (*Endpoint, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener on %s: %w (choose another with --metrics-addr)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	e := &Endpoint{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := e.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics listener stopped", "err", err)
		}
	}()
	return e, nil
}

// Addr is where the endpoint listens.
func (e *Endpoint) Addr() net.Addr {
	if e == nil {
		return nil
	}
	return e.ln.Addr()
}

// Close stops the endpoint and waits for it.
func (e *Endpoint) Close() {
	if e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = e.srv.Shutdown(ctx)
	e.wg.Wait()
}

package grpcserver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/grpcserver"
	"github.com/wiremesh/wiremesh/internal/metrics"
)

func serve(t *testing.T, h http.Handler, c grpcserver.Config, lim ...grpcserver.ConnLimits) *grpcserver.Listener {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var l grpcserver.ConnLimits
	if len(lim) > 0 {
		l = lim[0]
	}
	ln := grpcserver.Limit(raw, l)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = grpcserver.ServeConfig(ctx, ln, grpcserver.New(), h, slog.New(slog.DiscardHandler), c)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ln
}

// waitOpen waits until the listener holds at most n connections.
func waitOpen(t *testing.T, ln *grpcserver.Listener, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for ln.Open() > n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open, want at most %d", ln.Open(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// 300 clients that send a request's headers and never its body are
// disconnected once the body deadline passes.
func TestSlowBodiesAreClosed(t *testing.T) {
	read := func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
	ln := serve(t, http.HandlerFunc(read), grpcserver.Config{BodyTimeout: 300 * time.Millisecond, IdleTimeout: time.Hour})
	const n = 300
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /api/users HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
	}
	waitOpen(t, ln, 0)
	// And the clients see their connections end.
	for _, c := range conns[:10] {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("connection not closed by the server: %v", err)
		}
	}
}

// Idle keep-alive connections are closed after the idle timeout.
func TestIdleKeepAliveClosed(t *testing.T) {
	ln := serve(t, http.NotFoundHandler(), grpcserver.Config{IdleTimeout: 300 * time.Millisecond})
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitOpen(t, ln, 0)
}

// Connections beyond the per-source cap are closed at once and counted.
func TestConnectionCap(t *testing.T) {
	ln := serve(t, http.NotFoundHandler(), grpcserver.Config{}, grpcserver.ConnLimits{PerSource: 20, Max: 1000, CountLoopback: true})
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 50; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// Wait until the server has taken all 50 (accepted or refused).
	deadline := time.Now().Add(10 * time.Second)
	var out strings.Builder
	for {
		out.Reset()
		metrics.Write(&out, ln.Metrics())
		if strings.Contains(out.String(), `listener_connections_refused_total{scope="source"} 30`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want 30 refused:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := ln.Open(); n != 20 {
		t.Fatalf("open %d, want the cap of 20", n)
	}
	// A refused connection is closed by the server: reading it ends.
	_ = conns[49].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conns[49].Read(make([]byte, 1)); err != io.EOF && !isReset(err) {
		t.Fatalf("refused connection: %v, want it closed", err)
	}
}

func isReset(err error) bool {
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// A WebSocket-style upgrade (the relay) is not cut by the body deadline.
func TestUpgradeOutlivesBodyDeadline(t *testing.T) {
	up := func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		line, err := brw.ReadString('\n')
		if err != nil {
			return
		}
		fmt.Fprint(c, line)
	}
	ln := serve(t, http.HandlerFunc(up), grpcserver.Config{BodyTimeout: 100 * time.Millisecond})
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /relay HTTP/1.1\r\nHost: x\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	time.Sleep(500 * time.Millisecond) // past the body deadline
	fmt.Fprint(c, "still here\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := br.ReadString('\n'); err != nil || line != "still here\n" {
		t.Fatalf("upgraded connection cut: %q %v", line, err)
	}
}

// Once the body is in, a handler may take longer than the body deadline
// (its request context is not cancelled by the connection's deadline).
func TestSlowHandlerAfterBodyNotCut(t *testing.T) {
	h := func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		select {
		case <-time.After(600 * time.Millisecond):
			fmt.Fprint(w, "done")
		case <-r.Context().Done():
		}
	}
	ln := serve(t, http.HandlerFunc(h), grpcserver.Config{BodyTimeout: 100 * time.Millisecond})
	resp, err := http.Post("http://"+ln.Addr().String()+"/api/x", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != "done" {
		t.Fatalf("slow handler cut: %q", b)
	}
}

package grpcserver_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/internal/grpcserver"
)

// failing is a service with one unary and one streaming method, both
// failing at once with PermissionDenied (as Login and Sync do for an
// unknown peer).
var failing = grpc.ServiceDesc{
	ServiceName: "test.Failing",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Unary",
		Handler: func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
			h := func(context.Context, any) (any, error) { return nil, status.Error(codes.PermissionDenied, "no") }
			if in == nil {
				return h(ctx, nil)
			}
			return in(ctx, nil, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Failing/Unary"}, h)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Stream",
		ServerStreams: true,
		Handler:       func(any, grpc.ServerStream) error { return status.Error(codes.PermissionDenied, "no") },
	}},
}

// Errors leave as headers then trailers, never as one Trailers-Only
// HEADERS frame, which reverse proxies such as Caddy turn into Internal
// some of the time (status.go). A raw HTTP/2 client tells the two apart:
// Trailers-Only puts grpc-status among the response headers.
func TestErrorsAreNotTrailersOnly(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpcserver.New()
	g.RegisterService(&failing, struct{}{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = grpcserver.Serve(ctx, raw, g, http.NotFoundHandler(), slog.New(slog.DiscardHandler), 0)
	}()
	t.Cleanup(func() { cancel(); <-done })

	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	for _, tc := range []struct{ path, code string }{
		{"/test.Failing/Unary", "7"},
		{"/test.Failing/Stream", "7"},
		{"/test.Failing/Missing", "12"},
		{"/signalexchange.SignalExchange/Send", "12"},
	} {
		req, err := http.NewRequest("POST", "http://"+raw.Addr().String()+tc.path, bytes.NewReader([]byte{0, 0, 0, 0, 0}))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("TE", "trailers")
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if h := resp.Header.Get("Grpc-Status"); h != "" {
			t.Errorf("%s: grpc-status %s among the headers: a Trailers-Only response", tc.path, h)
		}
		if got := resp.Trailer.Get("Grpc-Status"); got != tc.code {
			t.Errorf("%s: trailer grpc-status %q, want %s", tc.path, got, tc.code)
		}
	}
}

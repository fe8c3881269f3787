package grpcserver

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// An RPC that fails before sending anything is answered by grpc-go with a
// "Trailers-Only" response: one HEADERS frame carrying both the HTTP status
// and grpc-status, ending the stream. Reverse proxies that copy the
// response's headers before they know its body is empty (Caddy with
// flush_interval -1 does, some of the time) forward grpc-status as an
// ordinary header and end the stream with an empty DATA frame; the client
// then sees "server closed the stream without sending trailers" (Internal)
// instead of the code we sent. NetBird clients act on those codes (NotFound
// and PermissionDenied at login start the SSO flow), so every error leaves
// here as headers, then trailers: the shape every successful call has,
// which proxies carry intact.

// headersFirst returns the server options that send response headers before
// an error status: for unary and streaming methods and for unknown services.
func headersFirst() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			resp, err := h(ctx, req)
			if err != nil {
				// Fails harmlessly when the headers went out already.
				_ = grpc.SendHeader(ctx, metadata.MD{})
			}
			return resp, err
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			err := h(srv, ss)
			if err != nil {
				_ = ss.SendHeader(metadata.MD{})
			}
			return err
		}),
		grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
			m, _ := grpc.MethodFromServerStream(ss)
			_ = ss.SendHeader(metadata.MD{})
			return status.Errorf(codes.Unimplemented, "unknown method %s", m)
		}),
	}
}

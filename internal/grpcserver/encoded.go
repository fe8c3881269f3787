package grpcserver

import (
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// Encoded is a response message encoded by its sender. A server from New
// writes its bytes as they are (no second encoding, no copy) and calls
// done once the transport holds them no more: written out, or dropped with
// the stream. A sender can so bound the bytes queued towards slow readers,
// which gRPC otherwise keeps without limit (a fan-out of whole maps to
// thousands of streams queued them all at once).
type Encoded struct {
	b    []byte
	once sync.Once
	done func()
}

// NewEncoded wraps b, the wire encoding of the message the stream's
// method sends; done (may be nil) runs once, when b is released.
func NewEncoded(b []byte, done func()) *Encoded { return &Encoded{b: b, done: done} }

// Release runs done unless it ran already. Senders call it when SendMsg
// fails or gives up, so a slot is never lost; the transport calls it too.
func (e *Encoded) Release() {
	e.once.Do(func() {
		if e.done != nil {
			e.done()
		}
	})
}

// codec is gRPC's proto codec that also passes Encoded through.
type codec struct{ inner encoding.CodecV2 }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	e, ok := v.(*Encoded)
	if !ok {
		return c.inner.Marshal(v)
	}
	if mem.IsBelowBufferPoolingThreshold(cap(e.b)) {
		// gRPC copies such small buffers instead of referencing them.
		e.Release()
		return mem.BufferSlice{mem.SliceBuffer(e.b)}, nil
	}
	return mem.BufferSlice{mem.NewBuffer(&e.b, releasePool{e})}, nil
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if _, ok := v.(*Encoded); ok {
		return fmt.Errorf("grpcserver: an Encoded message is for sending only")
	}
	return c.inner.Unmarshal(data, v)
}

func (c codec) Name() string { return c.inner.Name() }

// releasePool is the mem.BufferPool of one Encoded: gRPC "returns" the
// buffer when its last reference goes, which is the moment to release.
type releasePool struct{ e *Encoded }

func (p releasePool) Get(n int) *[]byte { b := make([]byte, n); return &b }
func (p releasePool) Put(*[]byte)       { p.e.Release() }

// encodedCodec is the server option that installs codec.
func encodedCodec() grpc.ServerOption {
	return grpc.ForceServerCodecV2(codec{inner: encoding.GetCodecV2(proto.Name)})
}

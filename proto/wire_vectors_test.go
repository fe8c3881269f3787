package proto_test

import (
	"bytes"
	"encoding/hex"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/wiremesh/wiremesh/internal/testvectors"
	_ "github.com/wiremesh/wiremesh/proto/mgmtpb"
	_ "github.com/wiremesh/wiremesh/proto/signalpb"
)

// TestWireVectors decodes and re-encodes every message the real NetBird code
// produced, byte for byte, proving our .proto files match the reference.
func TestWireVectors(t *testing.T) {
	w := testvectors.LoadWire(t)
	if len(w.Vectors) < 20 {
		t.Fatalf("expected at least 20 vectors, got %d", len(w.Vectors))
	}
	for _, v := range w.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(v.Message))
			if err != nil {
				t.Fatalf("message %s not defined in our proto: %v", v.Message, err)
			}
			raw, err := hex.DecodeString(v.Hex)
			if err != nil {
				t.Fatal(err)
			}
			decoded := mt.New().Interface()
			if err := proto.Unmarshal(raw, decoded); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if unknown := decoded.ProtoReflect().GetUnknown(); len(unknown) > 0 {
				t.Fatalf("decoding left unknown fields %x: a field number is missing", unknown)
			}
			want := mt.New().Interface()
			if err := (protojson.UnmarshalOptions{}).Unmarshal(v.Fields, want); err != nil {
				t.Fatalf("fields do not match our field names: %v", err)
			}
			if !proto.Equal(decoded, want) {
				t.Fatalf("decoded %v, want %v", decoded, want)
			}
			got, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, raw) {
				t.Fatalf("encoding differs\n got %x\nwant %x", got, raw)
			}
		})
	}
}

// TestMethodPaths checks that every gRPC method the reference exposes is in our services.
func TestMethodPaths(t *testing.T) {
	w := testvectors.LoadWire(t)
	have := map[string]bool{}
	for _, name := range []protoreflect.FullName{"management.ManagementService", "signalexchange.SignalExchange"} {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
		if err != nil {
			t.Fatal(err)
		}
		sd := d.(protoreflect.ServiceDescriptor)
		for i := 0; i < sd.Methods().Len(); i++ {
			have["/"+string(name)+"/"+string(sd.Methods().Get(i).Name())] = true
		}
	}
	for _, p := range w.MethodPaths {
		if !have[p] {
			t.Errorf("method %s missing", p)
		}
	}
}

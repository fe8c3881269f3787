package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// countingWriter is a ResponseWriter that keeps only the answer's length:
// the benchmark times the handler, not a recorder's copy of 12 MB.
type countingWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *countingWriter) Header() http.Header { return w.h }

func (w *countingWriter) WriteHeader(status int) { w.status = status }

func (w *countingWriter) Write(b []byte) (int, error) {
	w.n += len(b)
	return len(b), nil
}

// BenchmarkListAllPeers times GET /api/peers at 10,000 peers on SQLite
// as a cache hit serves it (the states read from the store on every
// call), with its allocations: what a call leaves to the GC decides how
// often a call shares the machine with a GC cycle, the benchmark's p99.
//
//	go test -run '^$' -bench BenchmarkListAllPeers -benchmem ./management/httpapi/
func BenchmarkListAllPeers(b *testing.B) {
	rig := newStreamRig(b, 10000)
	call := func() *countingWriter {
		w := &countingWriter{h: http.Header{}}
		r := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/api/peers", nil)
		if err := rig.api.listAllPeers(w, r, rig.acc.ID); err != nil || w.status != http.StatusOK {
			b.Fatalf("list: status %d, err %v", w.status, err)
		}
		return w
	}
	call() // the miss, which encodes the list
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w := call()
		b.SetBytes(int64(w.n))
	}
}

package healthcheck

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	healthy := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"status":"ok"}`)) }
	sick := func(w http.ResponseWriter, _ *http.Request) { http.Error(w, `{"status":"unhealthy"}`, 503) }
	ok := httptest.NewServer(http.HandlerFunc(healthy))
	defer ok.Close()
	okTLS := httptest.NewTLSServer(http.HandlerFunc(healthy))
	defer okTLS.Close()
	bad := httptest.NewServer(http.HandlerFunc(sick))
	defer bad.Close()
	closed := httptest.NewServer(http.HandlerFunc(healthy))
	closed.Close()
	for _, tc := range []struct {
		url, wantErr string
	}{
		{url: ok.URL + "/healthz"},
		{url: okTLS.URL + "/healthz"}, // self-signed on loopback: liveness only
		{url: bad.URL + "/healthz", wantErr: "HTTP 503"},
		{url: closed.URL + "/healthz", wantErr: "connect"},
		{url: "ftp://x/healthz", wantErr: "want http(s)"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := Check(ctx, tc.url)
		cancel()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Check(%s) = %v, want error containing %q", tc.url, err, tc.wantErr)
		}
	}
}

func TestCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	defer srv.Close()
	cmd := Command(srv.URL + "/healthz")
	cmd.SetArgs(nil)
	if err := cmd.ExecuteContext(context.Background()); err == nil {
		t.Fatal("healthcheck of an unhealthy server succeeded")
	}
}

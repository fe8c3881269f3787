package debugbundle

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// uploadServer answers like the management server's upload endpoint,
// checking the request against the contract.
func uploadServer(t *testing.T, wantID []byte, status int, answer string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || r.URL.Path != UploadPath {
			t.Errorf("request %s %s, want PUT %s", r.Method, r.URL.Path, UploadPath)
		}
		if got, want := r.Header.Get("Authorization"), "Bearer "+base64.RawURLEncoding.EncodeToString(wantID); got != want {
			t.Errorf("Authorization %q, want %q", got, want)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/gzip" {
			t.Errorf("Content-Type %q", ct)
		}
		if b, _ := io.ReadAll(r.Body); string(b) != "BUNDLE" {
			t.Errorf("body %q", b)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	})
}

func TestUpload(t *testing.T) {
	id := []byte("2b7c1f0e-9d10-4c1e-9a55-6f1c9a4e0c5b")
	cases := []struct {
		name    string
		status  int
		answer  string
		wantKey string
		wantErr string
	}{
		{"ok", 200, `{"upload_key":"k-123"}`, "k-123", ""},
		{"refused with message", 401, `{"message":"unknown or expired job","code":401}`, "", "unknown or expired job"},
		{"too large", 413, `{"message":"bundle exceeds 100 MiB","code":413}`, "", "HTTP 413"},
		{"not json", 502, "bad gateway", "", "bad gateway"},
		{"no key", 200, `{}`, "", "no upload_key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(uploadServer(t, id, c.status, c.answer))
			defer srv.Close()
			u := NewUploader(srv.URL, nil)
			defer u.Close()
			key, err := u.Upload(context.Background(), id, []byte("BUNDLE"))
			if key != c.wantKey || (c.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("Upload = %q, %v; want %q, error containing %q", key, err, c.wantKey, c.wantErr)
			}
			if err != nil && !errors.Is(err, ErrUploadRefused) {
				t.Fatalf("error %v is not ErrUploadRefused", err)
			}
		})
	}
}

func TestUploadTLS(t *testing.T) {
	id := []byte("job-1")
	srv := httptest.NewTLSServer(uploadServer(t, id, 200, `{"upload_key":"k"}`))
	defer srv.Close()
	// Without the server's CA the upload fails, as the gRPC dial would.
	u := NewUploader(srv.URL, &tls.Config{MinVersion: tls.VersionTLS12})
	if _, err := u.Upload(context.Background(), id, []byte("BUNDLE")); err == nil {
		t.Fatal("upload to a server with an unknown CA succeeded")
	}
	u.Close()
	u = NewUploader(srv.URL+"/", &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs})
	defer u.Close()
	if key, err := u.Upload(context.Background(), id, []byte("BUNDLE")); err != nil || key != "k" {
		t.Fatalf("Upload = %q, %v", key, err)
	}
}

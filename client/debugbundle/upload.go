package debugbundle

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// UploadPath is where the management server takes bundles, under the
// management URL the agent uses for gRPC.
const UploadPath = "/api/debug-bundles/upload"

// ErrUploadRefused is an upload the server answered with an error.
var ErrUploadRefused = errors.New("the management server refused the debug bundle")

// Uploader sends bundles to the management server: PUT UploadPath with
// the job's ID as the bearer token.
type Uploader struct {
	url    string
	client *http.Client
}

// NewUploader returns an uploader to the management server at baseURL
// (scheme://host:port, as the agent dials it), with tlsConf for https
// (nil: the system's roots).
func NewUploader(baseURL string, tlsConf *tls.Config) *Uploader {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsConf,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
		IdleConnTimeout:       30 * time.Second,
		MaxIdleConns:          1,
	}
	return &Uploader{
		url: strings.TrimSuffix(baseURL, "/") + UploadPath,
		// The whole upload, 50 MiB at worst, within 10 minutes.
		client: &http.Client{Transport: tr, Timeout: 10 * time.Minute},
	}
}

// Close releases idle connections.
func (u *Uploader) Close() { u.client.CloseIdleConnections() }

// Upload sends the bundle of job id and returns the server's key for it.
func (u *Uploader) Upload(ctx context.Context, id []byte, bundle []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u.url, bytes.NewReader(bundle))
	if err != nil {
		return "", fmt.Errorf("debug bundle upload: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+base64.RawURLEncoding.EncodeToString(id))
	req.Header.Set("Content-Type", "application/gzip")
	resp, err := u.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("debug bundle upload to %s: %w", u.url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("debug bundle upload: read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Message string `json:"message"`
			Code    int    `json:"code"`
		}
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Message != "" {
			msg = e.Message
		}
		if len(msg) > 512 {
			msg = msg[:512]
		}
		return "", fmt.Errorf("%w (HTTP %d): %s", ErrUploadRefused, resp.StatusCode, msg)
	}
	var ok struct {
		UploadKey string `json:"upload_key"`
	}
	if err := json.Unmarshal(body, &ok); err != nil || ok.UploadKey == "" {
		return "", fmt.Errorf("%w: the answer has no upload_key: %.200q", ErrUploadRefused, body)
	}
	return ok.UploadKey, nil
}

package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/jobs"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/updates"
)

var gzipDecoder sync.Once

// callBytes sends method to target as the operation docPath, checks
// request and response against the document and the status against want,
// and returns the raw response body: body is sent as contentType, auth is
// the whole Authorization header. callAs is it for JSON bodies; debug
// bundles use it directly.
func (d *docRig) callBytes(auth, method, docPath, target, contentType string, body []byte, want int) []byte {
	t := d.t
	t.Helper()
	gzipDecoder.Do(func() { openapi3filter.RegisterBodyDecoder("application/gzip", openapi3filter.FileBodyDecoder) })
	newReq := func() *http.Request {
		req, err := http.NewRequest(method, d.url+target, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		return req
	}
	route, params := d.route(method, docPath, target)
	in := &openapi3filter.RequestValidationInput{Request: newReq(), PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	if want < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Fatalf("%s %s: the test's request does not match openapi.json: %v", method, target, err)
		}
	}
	resp, err := http.DefaultClient.Do(newReq())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %.300s", method, target, resp.StatusCode, want, got)
	}
	in.Request = newReq()
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{RequestValidationInput: in,
		Status: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(got)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}})
	if err != nil {
		t.Errorf("%s %s: response %d does not match openapi.json: %v\nbody: %.300s", method, target, resp.StatusCode, err, got)
	}
	d.tried[method+" "+docPath] = struct{}{}
	if want < 300 {
		d.covered[method+" "+docPath] = struct{}{}
	}
	return got
}

// conformJobs drives the remote jobs operations: a peer whose agent
// announced bundle uploads gets a job, takes it (as the Job stream does),
// uploads the bundle and reports success; the bundle downloads as sent.
func conformJobs(t *testing.T, d *docRig) {
	t.Helper()
	ctx := context.Background()
	sk := d.call("POST", "/api/setup-keys", "/api/setup-keys", map[string]any{"name": "jobs", "type": "one-off", "expires_in": 86400, "auto_groups": []string{}}, 200)
	priv, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := peers.New(d.st, updates.NewHub(), nil, nil).Login(ctx, peers.LoginInput{Key: priv.Public(), SetupKey: str(sk, "key"),
		Meta: account.Meta{Hostname: "bundled", OS: "linux", NetbirdVersion: "0.77.1"}})
	if err != nil {
		t.Fatal(err)
	}
	peer := string(p.ID)
	js := jobs.New(jobs.Options{Store: d.st})
	body := map[string]any{"workload": map[string]any{"type": "bundle", "parameters": map[string]any{"bundle_for": true, "bundle_for_time": 2, "log_file_count": 10, "anonymize": false}}}
	d.call("POST", "/api/peers/{peerId}/jobs", "/api/peers/"+peer+"/jobs", body, 412) // not announced yet
	if err := js.SetSupport(ctx, p.AccountID, p.ID, true); err != nil {
		t.Fatal(err)
	}
	job := str(d.call("POST", "/api/peers/{peerId}/jobs", "/api/peers/"+peer+"/jobs", body, 201), "id")
	d.call("POST", "/api/peers/{peerId}/jobs", "/api/peers/"+peer+"/jobs", map[string]any{"workload": map[string]any{"type": "bundle",
		"parameters": map[string]any{"bundle_for": false, "bundle_for_time": 0, "log_file_count": 0, "anonymize": false}}}, 422)
	ds, err := js.Claim(ctx, p.AccountID, p.ID)
	if err != nil || len(ds) != 1 {
		t.Fatalf("claim: %v %v", ds, err)
	}
	var bundle bytes.Buffer
	zw := gzip.NewWriter(&bundle)
	_, _ = zw.Write([]byte("a debug bundle"))
	_ = zw.Close()
	bearer := "Bearer " + jobs.EncodeToken(ds[0].Token)
	d.callBytes("Bearer nonsense", "PUT", "/api/debug-bundles/upload", "/api/debug-bundles/upload", "application/gzip", bundle.Bytes(), 401)
	res := d.callBytes(bearer, "PUT", "/api/debug-bundles/upload", "/api/debug-bundles/upload", "application/gzip", bundle.Bytes(), 200)
	d.callBytes(bearer, "PUT", "/api/debug-bundles/upload", "/api/debug-bundles/upload", "application/gzip", bundle.Bytes(), 401)
	var uploaded struct {
		UploadKey string `json:"upload_key"`
	}
	if err := json.Unmarshal(res, &uploaded); err != nil || uploaded.UploadKey == "" {
		t.Fatalf("upload answer %s: %v", res, err)
	}
	if _, err := js.Finish(ctx, p.AccountID, p.ID, jobs.Result{Token: ds[0].Token, Succeeded: true, UploadKey: uploaded.UploadKey}); err != nil {
		t.Fatal(err)
	}
	if l := list(d.call("GET", "/api/peers/{peerId}/jobs", "/api/peers/"+peer+"/jobs", nil, 200)); len(l) != 1 || str(l[0], "status") != "succeeded" {
		t.Fatalf("jobs: %v", l)
	}
	d.call("GET", "/api/peers/{peerId}/jobs/{jobId}", "/api/peers/"+peer+"/jobs/"+job, nil, 200)
	d.call("GET", "/api/peers/{peerId}/jobs/{jobId}", "/api/peers/"+peer+"/jobs/nosuch", nil, 404)
	got := d.callBytes("Token "+d.token, "GET", "/api/peers/{peerId}/jobs/{jobId}/bundle", "/api/peers/"+peer+"/jobs/"+job+"/bundle", "", nil, 200)
	if !bytes.Equal(got, bundle.Bytes()) {
		t.Fatalf("bundle downloaded differs from the upload: %d bytes, want %d", len(got), bundle.Len())
	}
}

package jobs_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/client/debugbundle"
	"github.com/wiremesh/wiremesh/client/jobs"
	"github.com/wiremesh/wiremesh/client/mgmtclient"
	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// mgmt is an in-process management server with just GetServerKey and Job.
type mgmt struct {
	mgmtpb.UnimplementedManagementServiceServer
	t       *testing.T
	priv    key.Private
	noJobs  bool          // answer Job with Unimplemented
	streams chan *jobConn // each accepted Job stream
}

// jobConn is one Job stream as the server sees it.
type jobConn struct {
	handshake *mgmtpb.JobRequest
	send      chan *mgmtpb.JobRequest
	recv      chan *mgmtpb.JobResponse
	end       chan error // ends the stream with this error
}

func (m *mgmt) GetServerKey(context.Context, *mgmtpb.Empty) (*mgmtpb.ServerKeyResponse, error) {
	return &mgmtpb.ServerKeyResponse{Key: m.priv.Public().String()}, nil
}

func (m *mgmt) Job(st grpc.BidiStreamingServer[mgmtpb.EncryptedMessage, mgmtpb.EncryptedMessage]) error {
	if m.noJobs {
		return status.Error(codes.Unimplemented, "no jobs here")
	}
	first, err := st.Recv()
	if err != nil {
		return err
	}
	peer, err := key.ParsePublic(first.GetWgPubKey())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	sh := envelope.NewShared(m.priv, peer)
	var hs mgmtpb.JobRequest
	if err := sh.OpenProto(first.GetBody(), &hs); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	jc := &jobConn{handshake: &hs, send: make(chan *mgmtpb.JobRequest), recv: make(chan *mgmtpb.JobResponse, 16), end: make(chan error, 1)}
	select {
	case m.streams <- jc:
	case <-st.Context().Done():
		return nil
	}
	recvDone := make(chan error, 1)
	go func() {
		for {
			msg, err := st.Recv()
			if err != nil {
				recvDone <- err
				return
			}
			var r mgmtpb.JobResponse
			if err := sh.OpenProto(msg.GetBody(), &r); err != nil {
				m.t.Errorf("job response: %v", err)
				continue
			}
			jc.recv <- &r
		}
	}()
	for {
		select {
		case req := <-jc.send:
			body, err := sh.SealProto(req)
			if err != nil {
				return err
			}
			if err := st.Send(&mgmtpb.EncryptedMessage{WgPubKey: m.priv.Public().String(), Body: body}); err != nil {
				return err
			}
		case err := <-jc.end:
			return err
		case <-recvDone:
			return nil
		case <-st.Context().Done():
			return nil
		}
	}
}

// uploads is the management server's upload endpoint, checking the
// contract: PUT, bearer token = the job ID, a gzip body that is a tar.
type uploads struct {
	t      *testing.T
	mu     sync.Mutex
	got    map[string][]string // job ID -> file names in its bundle
	refuse string              // answer 403 with this message
}

func (u *uploads) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, msg string) {
		u.t.Errorf("upload: %s", msg)
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]any{"message": msg, "code": code})
	}
	if r.Method != http.MethodPut || r.URL.Path != "/api/debug-bundles/upload" || r.Header.Get("Content-Type") != "application/gzip" {
		fail(400, "bad request line or type: "+r.Method+" "+r.URL.Path)
		return
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	id, err := base64.RawURLEncoding.DecodeString(tok)
	if !ok || err != nil {
		fail(401, "bad token "+tok)
		return
	}
	u.mu.Lock()
	refuse := u.refuse
	u.mu.Unlock()
	if refuse != "" {
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(map[string]any{"message": refuse, "code": 403})
		return
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		fail(400, "not gzip")
		return
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fail(400, "not tar: "+err.Error())
			return
		}
		names = append(names, h.Name)
	}
	u.mu.Lock()
	u.got[string(id)] = names
	u.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]string{"upload_key": "key-" + string(id)})
}

func (u *uploads) setRefuse(msg string) {
	u.mu.Lock()
	u.refuse = msg
	u.mu.Unlock()
}

type rig struct {
	t    *testing.T
	srv  *mgmt
	up   *uploads
	mc   *mgmtclient.Client
	gate chan struct{} // when set, each build waits for a value
	done chan error    // Run's result
}

// newRig starts the servers and a runner against them; the runner stops,
// and everything it started must be gone, at the end of the test.
func newRig(t *testing.T, noJobs bool, gate bool) *rig {
	checkNoLeaks(t)
	priv, _ := key.NewPrivate()
	srvPriv, _ := key.NewPrivate()
	r := &rig{t: t, srv: &mgmt{t: t, priv: srvPriv, noJobs: noJobs, streams: make(chan *jobConn, 4)},
		up: &uploads{t: t, got: map[string][]string{}}, done: make(chan error, 1)}
	if gate {
		r.gate = make(chan struct{})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	mgmtpb.RegisterManagementServiceServer(g, r.srv)
	go func() { _ = g.Serve(ln) }()
	hs := httptest.NewServer(r.up)
	target, err := mgmtclient.ParseURL("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r.mc, err = mgmtclient.Dial(target, priv, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// The uploads go to the httptest server: in the all-in-one server
	// REST and gRPC share the port, here they are two listeners.
	up := debugbundle.NewUploader(hs.URL, target.TLSConfig())
	runner := jobs.New(jobs.Options{
		Open: func(ctx context.Context) (jobs.Stream, error) { return r.mc.Jobs(ctx) },
		Build: func(ctx context.Context, o debugbundle.Options, w io.Writer) (debugbundle.Result, error) {
			if r.gate != nil {
				select {
				case <-r.gate:
				case <-ctx.Done():
					return debugbundle.Result{}, ctx.Err()
				}
			}
			src := debugbundle.Source{Version: "netbird test", Commands: map[string][]string{},
				Status: func(context.Context) ([]byte, error) { return []byte(`{"status":"Connected"}`), nil }}
			return debugbundle.Build(ctx, src, o, w)
		},
		Uploader:   up,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		Log: slog.New(slog.DiscardHandler),
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { r.done <- runner.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Error("runner did not stop")
		}
		up.Close()
		r.mc.Close()
		hs.Close()
		g.Stop()
	})
	return r
}

func (r *rig) stream() *jobConn {
	r.t.Helper()
	select {
	case jc := <-r.srv.streams:
		return jc
	case <-time.After(10 * time.Second):
		r.t.Fatal("no Job stream opened")
		return nil
	}
}

func (r *rig) response(jc *jobConn) *mgmtpb.JobResponse {
	r.t.Helper()
	select {
	case resp := <-jc.recv:
		return resp
	case <-time.After(20 * time.Second):
		r.t.Fatal("no job response")
		return nil
	}
}

func bundleJob(id string, p *mgmtpb.BundleParameters) *mgmtpb.JobRequest {
	return &mgmtpb.JobRequest{ID: []byte(id), WorkloadParameters: &mgmtpb.JobRequest_Bundle{Bundle: p}}
}

func TestBundleJobUploads(t *testing.T) {
	r := newRig(t, false, false)
	jc := r.stream()
	if _, err := uuid.Parse(string(jc.handshake.GetID())); err != nil {
		t.Fatalf("handshake ID %q is not a UUID: %v", jc.handshake.GetID(), err)
	}
	jc.send <- bundleJob("job-1", &mgmtpb.BundleParameters{LogFileCount: 2, Anonymize: true})
	resp := r.response(jc)
	if string(resp.GetID()) != "job-1" || resp.GetStatus() != mgmtpb.JobStatus_succeeded || resp.GetBundle().GetUploadKey() != "key-job-1" {
		t.Fatalf("response %v, want job-1 succeeded with key-job-1", resp)
	}
	r.up.mu.Lock()
	files := strings.Join(r.up.got["job-1"], " ")
	r.up.mu.Unlock()
	for _, f := range []string{"version.txt", "status.json", "README.txt"} {
		if !strings.Contains(files, f) {
			t.Errorf("uploaded bundle holds %s, want %s", files, f)
		}
	}
}

func TestJobFailures(t *testing.T) {
	r := newRig(t, false, false)
	jc := r.stream()
	cases := []struct {
		name string
		req  *mgmtpb.JobRequest
		want string
	}{
		{"unknown workload", &mgmtpb.JobRequest{ID: []byte("j-unknown")}, jobs.ReasonUnsupported},
		{"collection too long", bundleJob("j-long", &mgmtpb.BundleParameters{BundleFor: true, BundleForTime: 9}), "bundle_for_time 9 is not within 1..5"},
		{"collection zero", bundleJob("j-zero", &mgmtpb.BundleParameters{BundleFor: true}), "bundle_for_time 0"},
		{"too many logs", bundleJob("j-logs", &mgmtpb.BundleParameters{LogFileCount: 1000}), "log_file_count 1000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			jc.send <- c.req
			resp := r.response(jc)
			if string(resp.GetID()) != string(c.req.GetID()) || resp.GetStatus() != mgmtpb.JobStatus_failed || !strings.Contains(string(resp.GetReason()), c.want) {
				t.Fatalf("response %v, want %s failed with %q", resp, c.req.GetID(), c.want)
			}
		})
	}
	t.Run("upload refused", func(t *testing.T) {
		r.up.setRefuse("the job expired")
		defer r.up.setRefuse("")
		jc.send <- bundleJob("j-refused", &mgmtpb.BundleParameters{})
		resp := r.response(jc)
		if resp.GetStatus() != mgmtpb.JobStatus_failed || !strings.Contains(string(resp.GetReason()), "the job expired") || !strings.Contains(string(resp.GetReason()), "HTTP 403") {
			t.Fatalf("response %v, want failed with the server's message", resp)
		}
	})
}

// One job runs, one waits, the next is answered busy; both admitted jobs
// finish once the first is let go.
func TestOneJobAtATime(t *testing.T) {
	r := newRig(t, false, true)
	jc := r.stream()
	jc.send <- bundleJob("a", &mgmtpb.BundleParameters{})
	jc.send <- bundleJob("b", &mgmtpb.BundleParameters{})
	jc.send <- bundleJob("a", &mgmtpb.BundleParameters{}) // a duplicate is not run twice
	jc.send <- bundleJob("c", &mgmtpb.BundleParameters{})
	resp := r.response(jc)
	if string(resp.GetID()) != "c" || resp.GetStatus() != mgmtpb.JobStatus_failed || string(resp.GetReason()) != jobs.ReasonBusy {
		t.Fatalf("response %v, want c failed busy", resp)
	}
	r.gate <- struct{}{}
	r.gate <- struct{}{}
	for _, want := range []string{"a", "b"} {
		resp := r.response(jc)
		if string(resp.GetID()) != want || resp.GetStatus() != mgmtpb.JobStatus_succeeded {
			t.Fatalf("response %v, want %s succeeded", resp, want)
		}
	}
	select {
	case resp := <-jc.recv:
		t.Fatalf("extra response %v", resp)
	case <-time.After(200 * time.Millisecond):
	}
}

// A dropped stream is opened again, with a new handshake, and a result
// finished while it was down is delivered on the new one.
func TestReconnect(t *testing.T) {
	r := newRig(t, false, true)
	jc := r.stream()
	jc.send <- bundleJob("x", &mgmtpb.BundleParameters{})
	time.Sleep(100 * time.Millisecond) // x is running, held at the gate
	jc.end <- status.Error(codes.Unavailable, "server restarting")
	jc2 := r.stream()
	if string(jc2.handshake.GetID()) == string(jc.handshake.GetID()) {
		t.Fatal("the new stream reused the handshake ID")
	}
	r.gate <- struct{}{}
	resp := r.response(jc2)
	if string(resp.GetID()) != "x" || resp.GetStatus() != mgmtpb.JobStatus_succeeded {
		t.Fatalf("response %v, want x succeeded", resp)
	}
	jc2.send <- bundleJob("y", &mgmtpb.BundleParameters{})
	r.gate <- struct{}{}
	if resp := r.response(jc2); string(resp.GetID()) != "y" || resp.GetStatus() != mgmtpb.JobStatus_succeeded {
		t.Fatalf("response %v, want y succeeded", resp)
	}
}

// A server without jobs ends the runner quietly and for good.
func TestUnimplementedStops(t *testing.T) {
	r := newRig(t, true, false)
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
		r.done <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("the runner kept trying a server without jobs")
	}
}

// checkNoLeaks fails the test if goroutines of the agent's code outlive it.
func checkNoLeaks(t *testing.T) {
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			leaked := agentGoroutines()
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("leaked goroutines:\n%s", strings.Join(leaked, "\n\n"))
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func agentGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "checkNoLeaks") || strings.Contains(g, "agentGoroutines") || strings.Contains(g, "testing.tRunner") && !strings.Contains(g, "wiremesh/client/") {
			continue
		}
		if strings.Contains(g, "wiremesh/wiremesh/client/") || strings.Contains(g, "google.golang.org/grpc") || strings.Contains(g, "net/http.(*persistConn)") {
			out = append(out, g)
		}
	}
	return out
}

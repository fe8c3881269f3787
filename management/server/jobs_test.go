package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/internal/pgtest"
	"github.com/wiremesh/wiremesh/internal/testoidc"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/jobs"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/users"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// syncAnnouncing opens a Sync stream whose request announces (or not) the
// debugBundleUpload capability, as our agent does, and waits for the
// first map (the capability is recorded before it is sent).
func syncAnnouncing(t *testing.T, ctx context.Context, e *env, p *testpeer.Peer, upload bool) context.CancelFunc {
	t.Helper()
	sctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	msg, _, err := p.Seal(sctx, &mgmtpb.SyncRequest{Meta: p.Meta(), WiremeshCapabilities: &mgmtpb.WiremeshCapabilities{DebugBundleUpload: upload}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := mgmtpb.NewManagementServiceClient(e.conn).Sync(sctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("first map: %v", err)
	}
	return cancel
}

// jobStream is a peer's Job stream, as the agent drives it.
type jobStream struct {
	t  *testing.T
	p  *testpeer.Peer
	s  grpc.BidiStreamingClient[mgmtpb.EncryptedMessage, mgmtpb.EncryptedMessage]
	sh *envelope.Shared
}

func openJobs(t *testing.T, ctx context.Context, e *env, p *testpeer.Peer) *jobStream {
	t.Helper()
	s, err := mgmtpb.NewManagementServiceClient(e.conn).Job(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hs, sh, err := p.Seal(ctx, &mgmtpb.JobRequest{ID: []byte("handshake")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(hs); err != nil {
		t.Fatal(err)
	}
	return &jobStream{t: t, p: p, s: s, sh: sh}
}

func (j *jobStream) next() *mgmtpb.JobRequest {
	j.t.Helper()
	m, err := j.s.Recv()
	if err != nil {
		j.t.Fatalf("job stream: %v", err)
	}
	var jr mgmtpb.JobRequest
	if err := j.sh.OpenProto(m.GetBody(), &jr); err != nil {
		j.t.Fatal(err)
	}
	return &jr
}

func (j *jobStream) answer(ctx context.Context, r *mgmtpb.JobResponse) {
	j.t.Helper()
	msg, _, err := j.p.Seal(ctx, r)
	if err != nil {
		j.t.Fatal(err)
	}
	if err := j.s.Send(msg); err != nil {
		j.t.Fatal(err)
	}
}

// upload PUTs body as an agent does and returns the status and body.
func upload(t *testing.T, e *env, token []byte, body []byte) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("PUT", "http://"+e.addr+"/api/debug-bundles/upload", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+jobs.EncodeToken(token))
	req.Header.Set("Content-Type", "application/gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("upload answer %d is not JSON: %.200s", resp.StatusCode, raw)
	}
	return resp.StatusCode, m
}

func gzipped(t *testing.T, n int) []byte {
	t.Helper()
	plain := make([]byte, n)
	_, _ = rand.Read(plain)
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, _ = w.Write(plain)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func bundleReq(forTime, files int) map[string]any {
	return map[string]any{"workload": map[string]any{"type": "bundle", "parameters": map[string]any{
		"bundle_for": true, "bundle_for_time": forTime, "log_file_count": files, "anonymize": true}}}
}

// waitJob polls the job until pred holds.
func waitJob(t *testing.T, o api, peer, id string, pred func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j := obj(o.call("GET", "/api/peers/"+peer+"/jobs/"+id, nil, 200))
		if pred(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: %v", id, j)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func peerID(t *testing.T, o api, name string) string {
	t.Helper()
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		if obj(p)["hostname"] == name {
			return obj(p)["id"].(string)
		}
	}
	t.Fatalf("no peer %s", name)
	return ""
}

// TestDebugBundleJob drives a debug bundle end to end: a peer logged in
// over gRPC announces the capability, an admin creates the job (REST),
// the peer receives it on its Job stream, uploads the bundle with the
// token and answers; the job shows succeeded and the bundle downloads
// byte for byte. Tokens are single-use; official clients are refused; a
// peer offline when the job is created gets it when it connects.
func TestDebugBundleJob(t *testing.T) { engines.Each(t, testDebugBundleJob) }

func testDebugBundleJob(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))["key"].(string)
	join := func(name string) *testpeer.Peer {
		p := testpeer.New(e.conn, name)
		if _, err := p.Login(ctx, key); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ours, official, later := join("ours"), join("official"), join("later")
	syncAnnouncing(t, ctx, e, ours, true)
	syncAnnouncing(t, ctx, e, official, false)
	oursID, officialID, laterID := peerID(t, o, "ours"), peerID(t, o, "official"), peerID(t, o, "later")

	// An agent that uploads elsewhere (or never said) is refused.
	for _, id := range []string{officialID, laterID} {
		if m := obj(o.call("POST", "/api/peers/"+id+"/jobs", bundleReq(2, 10), 412))["message"].(string); !strings.Contains(m, "wiremesh agent") {
			t.Errorf("refusal for a non-wiremesh agent: %q", m)
		}
	}
	// Validation names the field; nothing is stored.
	for name, body := range map[string]any{
		"bundle_for_time": bundleReq(6, 10),
		"log_file_count":  bundleReq(2, 1001),
		"workload.type":   map[string]any{"workload": map[string]any{"type": "shell", "parameters": map[string]any{}}},
		"anonymize": map[string]any{"workload": map[string]any{"type": "bundle", "parameters": map[string]any{
			"bundle_for": false, "bundle_for_time": 0, "log_file_count": 1}}},
	} {
		if m := obj(o.call("POST", "/api/peers/"+oursID+"/jobs", body, 422))["message"].(string); !strings.Contains(m, name) {
			t.Errorf("%s out of bounds: message %q does not name it", name, m)
		}
	}
	if l := list(o.call("GET", "/api/peers/"+oursID+"/jobs", nil, 200)); len(l) != 0 {
		t.Fatalf("jobs after refusals: %v", l)
	}
	o.call("POST", "/api/peers/no-such-peer/jobs", bundleReq(2, 10), 404)
	o.call("GET", "/api/peers/no-such-peer/jobs", nil, 404)
	o.call("GET", "/api/peers/"+oursID+"/jobs/no-such-job", nil, 404)
	// A user-role (service) user may read, as every service user reads
	// every module, but not create.
	viewer, _ := regularUser(t, e, o)
	viewer.call("POST", "/api/peers/"+oursID+"/jobs", bundleReq(2, 10), 403)

	// Online: the job is sent at once.
	js := openJobs(t, ctx, e, ours)
	created := obj(o.call("POST", "/api/peers/"+oursID+"/jobs", bundleReq(3, 42), 201))
	jobID := created["id"].(string)
	if created["status"] != "pending" || created["completed_at"] != nil || obj(obj(created["workload"])["result"])["upload_key"] != nil {
		t.Fatalf("created job: %v", created)
	}
	jr := js.next()
	if len(jr.GetID()) != jobs.TokenSize || jr.GetBundle().GetBundleForTime() != 3 || jr.GetBundle().GetLogFileCount() != 42 || !jr.GetBundle().GetAnonymize() || !jr.GetBundle().GetBundleFor() {
		t.Fatalf("job request: %v", jr)
	}
	// Wrong token, oversize body: refused, and the token still works.
	wrong := make([]byte, jobs.TokenSize)
	if st, _ := upload(t, e, wrong, gzipped(t, 10)); st != 401 {
		t.Fatalf("wrong token: %d, want 401", st)
	}
	big := append([]byte{0x1f, 0x8b}, make([]byte, jobs.MaxBundle)...)
	if st, _ := upload(t, e, jr.GetID(), big); st != 413 {
		t.Fatalf("oversize bundle: %d, want 413", st)
	}
	bundle := gzipped(t, 300<<10)
	st, res := upload(t, e, jr.GetID(), bundle)
	uploadKey, _ := res["upload_key"].(string)
	if st != 200 || uploadKey == "" {
		t.Fatalf("upload: %d %v", st, res)
	}
	if st, _ := upload(t, e, jr.GetID(), bundle); st != 401 {
		t.Fatalf("token reused: %d, want 401", st)
	}
	js.answer(ctx, &mgmtpb.JobResponse{ID: jr.GetID(), Status: mgmtpb.JobStatus_succeeded, WorkloadResults: &mgmtpb.JobResponse_Bundle{Bundle: &mgmtpb.BundleResult{UploadKey: uploadKey}}})
	done := waitJob(t, o, oursID, jobID, func(j map[string]any) bool { return j["status"] != "pending" })
	if done["status"] != "succeeded" || done["completed_at"] == nil || obj(obj(done["workload"])["result"])["upload_key"] != uploadKey || done["failed_reason"] != nil {
		t.Fatalf("finished job: %v", done)
	}
	req, _ := http.NewRequest("GET", "http://"+e.addr+"/api/peers/"+oursID+"/jobs/"+jobID+"/bundle", nil)
	req.Header.Set("Authorization", o.auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/gzip" || !bytes.Equal(got, bundle) {
		t.Fatalf("bundle download: %d %s, %d bytes, identical %v", resp.StatusCode, resp.Header.Get("Content-Type"), len(got), bytes.Equal(got, bundle))
	}
	if l := list(o.call("GET", "/api/peers/"+oursID+"/jobs", nil, 200)); len(l) != 1 || obj(l[0])["id"] != jobID {
		t.Fatalf("job list: %v", l)
	}
	found := false
	for _, ev := range list(o.call("GET", "/api/events/audit", nil, 200)) {
		found = found || (obj(ev)["activity_code"] == "peer.job.create" && obj(ev)["target_id"] == oursID)
	}
	if !found {
		t.Error("no peer.job.create event")
	}

	// Offline: the job waits for the peer's Job stream; a failure is
	// recorded with the agent's reason.
	syncAnnouncing(t, ctx, e, later, true)
	pending := obj(o.call("POST", "/api/peers/"+laterID+"/jobs", bundleReq(1, 1), 201))["id"].(string)
	time.Sleep(300 * time.Millisecond)
	if j := obj(o.call("GET", "/api/peers/"+laterID+"/jobs/"+pending, nil, 200)); j["status"] != "pending" {
		t.Fatalf("job of a peer without a Job stream: %v", j)
	}
	lj := openJobs(t, ctx, e, later)
	jr2 := lj.next()
	lj.answer(ctx, &mgmtpb.JobResponse{ID: jr2.GetID(), Status: mgmtpb.JobStatus_failed, Reason: []byte("disk full")})
	failed := waitJob(t, o, laterID, pending, func(j map[string]any) bool { return j["status"] != "pending" })
	if failed["status"] != "failed" || failed["failed_reason"] != "disk full" {
		t.Fatalf("failed job: %v", failed)
	}
	o.call("GET", "/api/peers/"+laterID+"/jobs/"+pending+"/bundle", nil, 404)
	if st, _ := upload(t, e, jr2.GetID(), bundle); st != 401 {
		t.Fatalf("upload for a finished job: %d, want 401", st)
	}
	_ = lj.s.CloseSend()
}

// jobsEnv starts a server with the built-in provider and jobs options o,
// and logs in peers (announcing bundle uploads, then leaving their Sync);
// it returns the owner's client and the peers' IDs by name.
func jobsEnv(t *testing.T, eng storetest.Engine, o jobs.Options, names ...string) (*env, api, map[string]*testpeer.Peer, map[string]string) {
	t.Helper()
	e := startOn(t, eng, server.Options{Identity: server.Identity{BuiltInIssuer: autoIssuer}, Jobs: o})
	setup := obj(e.api("").call("POST", "/api/setup", map[string]any{"email": "o@example.com", "password": "Owner-passw0rd!", "name": "O", "create_pat": true}, 200))
	owner := e.api("Token " + setup["personal_access_token"].(string))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := obj(owner.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))["key"].(string)
	ps, ids := map[string]*testpeer.Peer{}, map[string]string{}
	for _, n := range names {
		p := testpeer.New(e.conn, n)
		if _, err := p.Login(ctx, key); err != nil {
			t.Fatal(err)
		}
		syncAnnouncing(t, ctx, e, p, true)()
		ps[n], ids[n] = p, peerID(t, owner, n)
	}
	return e, owner, ps, ids
}

// TestDebugBundleExpiry: a job whose peer never opens its Job stream fails
// after the delivery timeout; a delivered job's token expires with the
// upload window and the job fails for want of an answer.
func TestDebugBundleExpiry(t *testing.T) { engines.Each(t, testDebugBundleExpiry) }

func testDebugBundleExpiry(t *testing.T, eng storetest.Engine) {
	e, o, ps, ids := jobsEnv(t, eng, jobs.Options{DeliveryTimeout: 500 * time.Millisecond, UploadWindow: 700 * time.Millisecond, Sweep: 100 * time.Millisecond}, "p")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := ids["p"]
	never := obj(o.call("POST", "/api/peers/"+id+"/jobs", bundleReq(1, 1), 201))["id"].(string)
	j := waitJob(t, o, id, never, func(j map[string]any) bool { return j["status"] != "pending" })
	if j["status"] != "failed" || !strings.Contains(j["failed_reason"].(string), "peer did not connect within") {
		t.Fatalf("undelivered job: %v", j)
	}
	js := openJobs(t, ctx, e, ps["p"])
	late := obj(o.call("POST", "/api/peers/"+id+"/jobs", bundleReq(1, 1), 201))["id"].(string)
	jr := js.next()
	time.Sleep(800 * time.Millisecond)
	if st, _ := upload(t, e, jr.GetID(), gzipped(t, 100)); st != 401 {
		t.Fatalf("expired token: %d, want 401", st)
	}
	j = waitJob(t, o, id, late, func(j map[string]any) bool { return j["status"] != "pending" })
	if j["status"] != "failed" || !strings.Contains(j["failed_reason"].(string), "did not report a result") {
		t.Fatalf("unanswered job: %v", j)
	}
}

// TestDebugBundleCaps: the per-peer cap on pending jobs answers 429, the
// per-account cap on bundles and pending jobs 412, each with a message.
func TestDebugBundleCaps(t *testing.T) { engines.Each(t, testDebugBundleCaps) }

func testDebugBundleCaps(t *testing.T, eng storetest.Engine) {
	_, o, _, ids := jobsEnv(t, eng, jobs.Options{MaxPendingPerPeer: 3, MaxBundlesPerAccount: 4}, "p", "q")
	for range 3 {
		o.call("POST", "/api/peers/"+ids["p"]+"/jobs", bundleReq(1, 1), 201)
	}
	if m := obj(o.call("POST", "/api/peers/"+ids["p"]+"/jobs", bundleReq(1, 1), 429))["message"].(string); !strings.Contains(m, "pending jobs") {
		t.Fatalf("peer cap: %q", m)
	}
	o.call("POST", "/api/peers/"+ids["q"]+"/jobs", bundleReq(1, 1), 201)
	if m := obj(o.call("POST", "/api/peers/"+ids["q"]+"/jobs", bundleReq(1, 1), 412))["message"].(string); !strings.Contains(m, "debug bundles") {
		t.Fatalf("account cap: %q", m)
	}
	if l := list(o.call("GET", "/api/peers/"+ids["q"]+"/jobs", nil, 200)); len(l) != 1 {
		t.Fatalf("q's jobs after the refusal: %v", l)
	}
}

// TestDebugBundleJobsOtherAccount: another account's admin learns nothing
// of a peer's jobs: every job route answers 404.
func TestDebugBundleJobsOtherAccount(t *testing.T) {
	idp := testoidc.Start(t, "")
	e := startOn(t, engines.Engines()[0], server.Options{Identity: server.Identity{Issuer: idp.URL, ClientID: testoidc.ClientID, Mode: users.DomainAccounts}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alice := e.api("Bearer " + idp.Mint(t, map[string]any{"sub": "a|1", "email": "alice@a.example", "email_verified": true}))
	bob := e.api("Bearer " + idp.Mint(t, map[string]any{"sub": "b|1", "email": "bob@b.example", "email_verified": true}))
	if obj(alice.call("GET", "/api/users/current", nil, 200))["role"] != "owner" || obj(bob.call("GET", "/api/users/current", nil, 200))["role"] != "owner" {
		t.Fatal("alice and bob should own separate accounts")
	}
	key := obj(alice.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))["key"].(string)
	p := testpeer.New(e.conn, "alice-laptop")
	if _, err := p.Login(ctx, key); err != nil {
		t.Fatal(err)
	}
	syncAnnouncing(t, ctx, e, p, true)
	id := peerID(t, alice, "alice-laptop")
	job := obj(alice.call("POST", "/api/peers/"+id+"/jobs", bundleReq(1, 1), 201))["id"].(string)
	bob.call("GET", "/api/peers/"+id+"/jobs", nil, 404)
	bob.call("POST", "/api/peers/"+id+"/jobs", bundleReq(1, 1), 404)
	bob.call("GET", "/api/peers/"+id+"/jobs/"+job, nil, 404)
	bob.call("GET", "/api/peers/"+id+"/jobs/"+job+"/bundle", nil, 404)
	if l := list(alice.call("GET", "/api/peers/"+id+"/jobs", nil, 200)); len(l) != 1 {
		t.Fatalf("alice's jobs after bob's attempts: %v", l)
	}
}

// TestDebugBundleAcrossInstances: two management instances on one
// Postgres. A job created through one reaches the peer's Job stream on
// the other (its poll of undelivered jobs), the bundle may be uploaded to
// either and downloads from either.
func TestDebugBundleAcrossInstances(t *testing.T) {
	pg := pgtest.Start(t)
	cfg := store.Config{Engine: store.Postgres, DSN: pg.NewDatabase(t)}
	e1 := startWith(t, "", server.Options{Store: cfg, Instance: "m1", Identity: server.Identity{BuiltInIssuer: autoIssuer}})
	e2 := startWith(t, "", server.Options{Store: cfg, Instance: "m2"})
	setup := obj(e1.api("").call("POST", "/api/setup", map[string]any{"email": "o@example.com", "password": "Owner-passw0rd!", "name": "O", "create_pat": true}, 200))
	pat := "Token " + setup["personal_access_token"].(string)
	o1, o2 := e1.api(pat), e2.api(pat)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := obj(o1.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))["key"].(string)
	p := testpeer.New(e2.conn, "p")
	if _, err := p.Login(ctx, key); err != nil {
		t.Fatal(err)
	}
	syncAnnouncing(t, ctx, e2, p, true)
	js := openJobs(t, ctx, e2, p)
	id := peerID(t, o1, "p")
	// A first job through m2 shows the stream is attached there...
	obj(o2.call("POST", "/api/peers/"+id+"/jobs", bundleReq(1, 1), 201))
	first := js.next()
	js.answer(ctx, &mgmtpb.JobResponse{ID: first.GetID(), Status: mgmtpb.JobStatus_failed, Reason: []byte("not now")})
	// ...so this one, through m1, arrives by m2's poll.
	job := obj(o1.call("POST", "/api/peers/"+id+"/jobs", bundleReq(2, 5), 201))["id"].(string)
	start := time.Now()
	jr := js.next()
	if jr.GetBundle().GetLogFileCount() != 5 {
		t.Fatalf("second job request: %v", jr)
	}
	t.Logf("a job created on m1 reached the Job stream on m2 in %v", time.Since(start).Round(time.Millisecond))
	bundle := gzipped(t, 64<<10)
	st, res := upload(t, e1, jr.GetID(), bundle)
	if st != 200 {
		t.Fatalf("upload to the other instance: %d %v", st, res)
	}
	js.answer(ctx, &mgmtpb.JobResponse{ID: jr.GetID(), Status: mgmtpb.JobStatus_succeeded, WorkloadResults: &mgmtpb.JobResponse_Bundle{Bundle: &mgmtpb.BundleResult{UploadKey: res["upload_key"].(string)}}})
	if j := waitJob(t, o1, id, job, func(j map[string]any) bool { return j["status"] != "pending" }); j["status"] != "succeeded" {
		t.Fatalf("job: %v", j)
	}
	req, _ := http.NewRequest("GET", "http://"+e2.addr+"/api/peers/"+id+"/jobs/"+job+"/bundle", nil)
	req.Header.Set("Authorization", pat)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, bundle) {
		t.Fatalf("download from m2: %d, identical %v", resp.StatusCode, bytes.Equal(got, bundle))
	}
	if l := list(o2.call("GET", "/api/peers/"+id+"/jobs", nil, 200)); len(l) != 2 {
		t.Fatalf("jobs through m2: %v", l)
	}
}

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
)

// TestRemoteDebugBundle: an admin asks a running agent for a debug bundle
// through the REST API (POST /api/peers/{id}/jobs); the agent gets the job
// on its Job stream, builds the bundle, uploads it to this server and
// answers; the job shows succeeded and the admin downloads an archive with
// the agent's status and profile, without its private key.
func TestRemoteDebugBundle(t *testing.T) {
	m := NewMesh(t)
	owner := m.Server.Wait(t, regexp.MustCompile(`Owner created:\s+(\S+), initial password (\S+) `), 5*time.Second)
	admin, _ := m.ownerToken(owner[1], owner[2])
	a := m.Agent("a", netlab.Home)
	m.Up(a)
	var id string
	for _, p := range getList(t, admin, "/api/peers") {
		if p["name"] == "a" {
			id, _ = p["id"].(string)
		}
	}
	if id == "" {
		t.Fatal("GET /api/peers does not list a")
	}
	job := map[string]any{"workload": map[string]any{"type": "bundle", "parameters": map[string]any{
		"bundle_for": false, "bundle_for_time": 1, "log_file_count": 1, "anonymize": false}}}
	// The agent announces that it uploads bundles on its Sync stream, which
	// may lag `up` by a moment.
	var created map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for {
		var status int
		created, status = admin.try("POST", "/api/peers/"+id+"/jobs", job)
		if status == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("POST /api/peers/%s/jobs: %d %v", id, status, created)
		}
		time.Sleep(300 * time.Millisecond)
	}
	jobID, _ := created["id"].(string)
	deadline = time.Now().Add(60 * time.Second)
	for {
		got := admin.call("GET", "/api/peers/"+id+"/jobs/"+jobID, nil, 200)
		if got["status"] == "succeeded" {
			break
		}
		if got["status"] == "failed" || time.Now().After(deadline) {
			t.Fatalf("job: %v\nagent log:\n%s", got, tail(a.Daemon.Output()))
		}
		time.Sleep(300 * time.Millisecond)
	}
	raw := admin.get("/api/peers/" + id + "/jobs/" + jobID + "/bundle")
	files := untar(t, raw)
	for _, want := range []string{"status.json", "config.json", "version.txt"} {
		if _, ok := files[want]; !ok {
			t.Errorf("the bundle has no %s (it has %v)", want, keys(files))
		}
	}
	// The agent's private key, from its profile in its state directory.
	var profile struct {
		PrivateKey string `json:"private_key"`
	}
	_ = filepath.WalkDir(a.Dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") && profile.PrivateKey == "" {
			if b, err := os.ReadFile(path); err == nil {
				_ = json.Unmarshal(b, &profile)
			}
		}
		return nil
	})
	if profile.PrivateKey == "" {
		t.Fatal("no profile with a private key under the agent's state directory")
	}
	for name, b := range files {
		if bytes.Contains(b, []byte(profile.PrivateKey)) {
			t.Errorf("%s in the bundle holds the agent's private key", name)
		}
	}
}

// try is call without a wanted status: it returns the body and status.
func (r restClient) try(method, path string, body any) (map[string]any, int) {
	r.t.Helper()
	raw, status := r.do(method, path, body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m, status
}

// get returns the raw body of a GET that must answer 200.
func (r restClient) get(path string) []byte {
	r.t.Helper()
	raw, status := r.do("GET", path, nil)
	if status != 200 {
		r.t.Fatalf("GET %s: %d %s", path, status, raw)
	}
	return raw
}

func untar(t *testing.T, gz []byte) map[string][]byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatalf("the bundle is not gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatalf("the bundle is not a tar archive: %v", err)
		}
		b, _ := io.ReadAll(tr)
		files[strings.TrimPrefix(h.Name, "./")] = b
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

package mgmtclient

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Job is a job the management server asks this peer to run.
type Job struct {
	ID []byte
	// Bundle is set for a debug-bundle job; nil for a kind this agent
	// does not know.
	Bundle *BundleParams
}

// BundleParams are a debug-bundle job's parameters.
type BundleParams struct {
	// For: collect for ForMinutes before building.
	For        bool
	ForMinutes int64
	// LogFileCount is how many log files (newest first) to include.
	LogFileCount int32
	// Anonymize replaces public addresses and names.
	Anonymize      bool
	AnonymizeLevel string
}

// JobResult answers a job: failed when Err is set, else succeeded.
type JobResult struct {
	ID        []byte
	Err       string
	UploadKey string // a bundle job's upload key
}

// JobStream is an open Job stream. Recv and Send may run on two
// goroutines, but each on one only.
type JobStream struct {
	st  grpc.BidiStreamingClient[mgmtpb.EncryptedMessage, mgmtpb.EncryptedMessage]
	sh  *envelope.Shared
	pub string
}

// Jobs opens the Job stream and sends its handshake (a JobRequest with a
// fresh ID). The stream lives until ctx ends or the server closes it;
// a server without jobs answers the first Recv with Unimplemented.
func (c *Client) Jobs(ctx context.Context) (*JobStream, error) {
	sh, err := c.shared(ctx)
	if err != nil {
		return nil, err
	}
	st, err := c.api.Job(ctx)
	if err != nil {
		return nil, c.explain(err)
	}
	js := &JobStream{st: st, sh: sh, pub: c.priv.Public().String()}
	id := uuid.New()
	if err := js.send(&mgmtpb.JobRequest{ID: []byte(id.String())}); err != nil {
		return nil, fmt.Errorf("job stream handshake: %w", err)
	}
	return js, nil
}

// Recv waits for the next job.
func (s *JobStream) Recv() (Job, error) {
	m, err := s.st.Recv()
	if err != nil {
		return Job{}, err
	}
	var r mgmtpb.JobRequest
	if err := s.sh.OpenProto(m.GetBody(), &r); err != nil {
		return Job{}, fmt.Errorf("job request: %w", err)
	}
	j := Job{ID: r.GetID()}
	if b := r.GetBundle(); b != nil {
		j.Bundle = &BundleParams{For: b.GetBundleFor(), ForMinutes: b.GetBundleForTime(), LogFileCount: b.GetLogFileCount(),
			Anonymize: b.GetAnonymize(), AnonymizeLevel: b.GetAnonymizeLevel()}
	}
	return j, nil
}

// Send answers a job.
func (s *JobStream) Send(r JobResult) error {
	resp := &mgmtpb.JobResponse{ID: r.ID, Status: mgmtpb.JobStatus_succeeded}
	if r.Err != "" {
		resp.Status, resp.Reason = mgmtpb.JobStatus_failed, []byte(r.Err)
	} else if r.UploadKey != "" {
		resp.WorkloadResults = &mgmtpb.JobResponse_Bundle{Bundle: &mgmtpb.BundleResult{UploadKey: r.UploadKey}}
	}
	return s.send(resp)
}

func (s *JobStream) send(m proto.Message) error {
	body, err := s.sh.SealProto(m)
	if err != nil {
		return err
	}
	return s.st.Send(&mgmtpb.EncryptedMessage{WgPubKey: s.pub, Body: body})
}

package grpcapi

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/jobs"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// JobQueue is what the Job stream needs of the remote jobs service.
type JobQueue interface {
	SetSupport(ctx context.Context, acc account.ID, peer account.PeerID, upload bool) error
	Attach(peer account.PeerID) (wake <-chan struct{}, detach func())
	Claim(ctx context.Context, acc account.ID, peer account.PeerID) ([]jobs.Delivery, error)
	Unclaim(ctx context.Context, d jobs.Delivery) error
	Finish(ctx context.Context, acc account.ID, peer account.PeerID, r jobs.Result) (account.Job, error)
}

// Job accepts the client's handshake, then hands the peer its pending
// jobs (JobRequest with the job's upload token as ID) as they come, and
// records the JobResponses. It must never answer PermissionDenied to a
// registered peer (the client would restart its engine).
func (s *Server) Job(stream grpc.BidiStreamingServer[mgmtpb.EncryptedMessage, mgmtpb.EncryptedMessage]) error {
	ctx := stream.Context()
	first, err := s.firstJobMessage(ctx, stream)
	if err != nil {
		return err
	}
	var jr mgmtpb.JobRequest
	pk, sh, err := s.open(first, &jr)
	if err != nil {
		return err
	}
	peer, err := s.registeredPeer(ctx, pk)
	if err != nil {
		return err
	}
	// The reader ends when this handler returns, because that cancels the
	// stream.
	gone := make(chan struct{})
	answers := make(chan *mgmtpb.EncryptedMessage)
	go func() {
		defer close(gone)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			select {
			case answers <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wake <-chan struct{}
	if s.o.Jobs != nil {
		var detach func()
		wake, detach = s.o.Jobs.Attach(peer.ID)
		defer detach()
	}
	for {
		select {
		case <-gone:
			return nil
		case <-ctx.Done():
			return nil
		case <-s.closed:
			return status.Error(codes.Unavailable, "server shutting down")
		case <-wake:
			if err := s.sendJobs(ctx, stream, sh, peer); err != nil {
				return err
			}
		case m := <-answers:
			s.jobAnswer(ctx, sh, peer, m)
		}
	}
}

// sendJobs claims the peer's undelivered jobs and sends them; a job that
// cannot be sent is put back for the next stream.
func (s *Server) sendJobs(ctx context.Context, stream grpc.BidiStreamingServer[mgmtpb.EncryptedMessage, mgmtpb.EncryptedMessage], sh *envelope.Shared, peer account.Peer) error {
	ds, err := s.o.Jobs.Claim(ctx, peer.AccountID, peer.ID)
	if err != nil && ctx.Err() == nil {
		s.o.Log.WarnContext(ctx, "claim jobs", "peer", peer.ID, "err", err)
	}
	for i, d := range ds {
		p := d.Job.Params
		msg, err := s.seal(sh, &mgmtpb.JobRequest{ID: d.Token, WorkloadParameters: &mgmtpb.JobRequest_Bundle{Bundle: &mgmtpb.BundleParameters{
			BundleFor: p.BundleFor, BundleForTime: int64(p.BundleForTime), LogFileCount: int32(p.LogFileCount), Anonymize: p.Anonymize}}})
		if err == nil {
			err = stream.Send(msg)
		}
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			for _, u := range ds[i:] {
				if uerr := s.o.Jobs.Unclaim(cctx, u); uerr != nil {
					s.o.Log.WarnContext(cctx, "put back unsent job", "job", u.Job.ID, "err", uerr)
				}
			}
			cancel()
			return err
		}
		s.o.Log.InfoContext(ctx, "job sent to peer", "peer", peer.ID, "job", d.Job.ID)
	}
	return nil
}

// jobAnswer records one JobResponse; answers that open badly or match no
// pending job of the peer are logged and dropped.
func (s *Server) jobAnswer(ctx context.Context, sh *envelope.Shared, peer account.Peer, m *mgmtpb.EncryptedMessage) {
	if s.o.Jobs == nil {
		return
	}
	var resp mgmtpb.JobResponse
	if err := sh.OpenProto(m.GetBody(), &resp); err != nil {
		s.o.Log.WarnContext(ctx, "unreadable job response", "peer", peer.ID, "err", err)
		return
	}
	r := jobs.Result{Token: resp.GetID(), Succeeded: resp.GetStatus() == mgmtpb.JobStatus_succeeded, Reason: clip(string(resp.GetReason())),
		UploadKey: resp.GetBundle().GetUploadKey()}
	j, err := s.o.Jobs.Finish(ctx, peer.AccountID, peer.ID, r)
	if err != nil {
		s.o.Log.WarnContext(ctx, "job response not recorded", "peer", peer.ID, "err", err)
		return
	}
	s.o.Log.InfoContext(ctx, "job finished", "peer", peer.ID, "job", j.ID, "status", j.Status, "reason", j.FailedReason)
}

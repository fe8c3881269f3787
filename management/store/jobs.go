package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wiremesh/wiremesh/management/account"
)

// --- remote jobs (debug bundles) ---

const jobCols = `id, account_id, peer_id, triggered_by, params, status, failed_reason, created_at, delivered_at, completed_at, upload_key, uploaded_at`

func scanJob(sc scanner) (account.Job, error) {
	var (
		j                                  account.Job
		id, acc, peer, by, params, status  string
		created, delivered, done, uploaded int64
	)
	if err := sc.Scan(&id, &acc, &peer, &by, &params, &status, &j.FailedReason, &created, &delivered, &done, &j.UploadKey, &uploaded); err != nil {
		return j, mapErr(err)
	}
	if err := json.Unmarshal([]byte(params), &j.Params); err != nil {
		return j, fmt.Errorf("job %s: bad params: %w", id, err)
	}
	j.ID, j.AccountID, j.PeerID, j.TriggeredBy, j.Status = account.JobID(id), account.ID(acc), account.PeerID(peer), account.UserID(by), account.JobStatus(status)
	j.CreatedAt, j.DeliveredAt, j.CompletedAt, j.UploadedAt = fromNanos(created), fromNanos(delivered), fromNanos(done), fromNanos(uploaded)
	return j, nil
}

// InsertJob adds a pending job.
func (a *AccountTx) InsertJob(ctx context.Context, j account.Job) error {
	if err := a.owns("job", j.AccountID); err != nil {
		return err
	}
	params, err := json.Marshal(j.Params)
	if err != nil {
		return err
	}
	_, err = a.q().exec(ctx, `INSERT INTO peer_jobs (id, account_id, peer_id, triggered_by, params, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		string(j.ID), string(a.id), string(j.PeerID), string(j.TriggeredBy), string(params), string(account.JobPending), nanos(j.CreatedAt))
	return mapErr(err)
}

// Jobs lists a peer's jobs, newest first.
func (a *AccountTx) Jobs(ctx context.Context, peer account.PeerID) ([]account.Job, error) {
	return queryAll(ctx, a.q(), scanJob, `SELECT `+jobCols+` FROM peer_jobs WHERE account_id = ? AND peer_id = ? ORDER BY created_at DESC, id`, string(a.id), string(peer))
}

// Job finds one of a peer's jobs.
func (a *AccountTx) Job(ctx context.Context, peer account.PeerID, id account.JobID) (account.Job, error) {
	return scanJob(a.q().queryRow(ctx, `SELECT `+jobCols+` FROM peer_jobs WHERE id = ? AND account_id = ? AND peer_id = ?`, string(id), string(a.id), string(peer)))
}

// JobLoad counts a peer's pending jobs and the account's jobs that hold
// or may come to hold a bundle (pending, or with a bundle stored).
func (a *AccountTx) JobLoad(ctx context.Context, peer account.PeerID) (peerPending, accountHeld int, err error) {
	err = a.q().queryRow(ctx, `SELECT COUNT(*) FROM peer_jobs WHERE account_id = ? AND peer_id = ? AND status = ?`, string(a.id), string(peer), string(account.JobPending)).Scan(&peerPending)
	if err != nil {
		return 0, 0, mapErr(err)
	}
	err = a.q().queryRow(ctx, `SELECT COUNT(*) FROM peer_jobs j WHERE j.account_id = ? AND (j.status = ? OR EXISTS (SELECT 1 FROM peer_job_bundles b WHERE b.job_id = j.id))`,
		string(a.id), string(account.JobPending)).Scan(&accountHeld)
	return peerPending, accountHeld, mapErr(err)
}

// UndeliveredJobs lists a peer's pending jobs not yet handed to it, oldest
// first.
func (a *AccountTx) UndeliveredJobs(ctx context.Context, peer account.PeerID) ([]account.Job, error) {
	return queryAll(ctx, a.q(), scanJob, `SELECT `+jobCols+` FROM peer_jobs WHERE account_id = ? AND peer_id = ? AND status = ? AND delivered_at = 0 ORDER BY created_at, id`,
		string(a.id), string(peer), string(account.JobPending))
}

// ClaimJob records that a job is being handed to its peer with the upload
// token whose hash is tokenHash. It reports false when the job was claimed
// elsewhere (another instance) or is no longer pending.
func (a *AccountTx) ClaimJob(ctx context.Context, id account.JobID, tokenHash string, now int64) (bool, error) {
	n, err := a.q().exec(ctx, `UPDATE peer_jobs SET delivered_at = ?, token_hash = ? WHERE id = ? AND account_id = ? AND status = ? AND delivered_at = 0`,
		now, tokenHash, string(id), string(a.id), string(account.JobPending))
	return n == 1, mapErr(err)
}

// UnclaimJob undoes ClaimJob when the job could not be sent, so it is
// handed over on the peer's next Job stream.
func (a *AccountTx) UnclaimJob(ctx context.Context, id account.JobID, tokenHash string) error {
	_, err := a.q().exec(ctx, `UPDATE peer_jobs SET delivered_at = 0, token_hash = NULL WHERE id = ? AND account_id = ? AND token_hash = ? AND status = ? AND uploaded_at = 0`,
		string(id), string(a.id), tokenHash, string(account.JobPending))
	return mapErr(err)
}

// JobByToken finds the job whose upload token hashes to tokenHash, in any
// account (the upload is authenticated by the token alone).
func (tx *Tx) JobByToken(ctx context.Context, tokenHash string) (account.Job, error) {
	return scanJob(tx.q.queryRow(ctx, `SELECT `+jobCols+` FROM peer_jobs WHERE token_hash = ?`, tokenHash))
}

// StoreBundle keeps a job's bundle under uploadKey, once: it reports false
// unless the job is pending, was delivered after deliveredAfter and has no
// bundle yet.
func (a *AccountTx) StoreBundle(ctx context.Context, id account.JobID, tokenHash string, data []byte, uploadKey string, deliveredAfter, now int64) (bool, error) {
	// The token must still be the job's: a job handed out again (a new
	// token) does not take a bundle uploaded with the old one.
	n, err := a.q().exec(ctx, `UPDATE peer_jobs SET upload_key = ?, uploaded_at = ? WHERE id = ? AND account_id = ? AND token_hash = ? AND status = ? AND delivered_at > ? AND uploaded_at = 0`,
		uploadKey, now, string(id), string(a.id), tokenHash, string(account.JobPending), deliveredAfter)
	if err != nil || n != 1 {
		return false, mapErr(err)
	}
	_, err = a.q().exec(ctx, `INSERT INTO peer_job_bundles (job_id, account_id, data, created_at) VALUES (?, ?, ?, ?)`, string(id), string(a.id), data, now)
	return err == nil, mapErr(err)
}

// FinishJob records the peer's answer for the pending job it was handed
// with tokenHash, as decide says from the job as stored; ErrNotFound if
// the peer has no such pending job.
func (a *AccountTx) FinishJob(ctx context.Context, peer account.PeerID, tokenHash string, decide func(account.Job) (account.JobStatus, string), now int64) (account.Job, error) {
	j, err := scanJob(a.q().queryRow(ctx, `SELECT `+jobCols+` FROM peer_jobs WHERE token_hash = ? AND account_id = ? AND peer_id = ? AND status = ?`+a.tx.eng.forUpdate(),
		tokenHash, string(a.id), string(peer), string(account.JobPending)))
	if err != nil {
		return j, err
	}
	status, reason := decide(j)
	err = affected(a.q().exec(ctx, `UPDATE peer_jobs SET status = ?, failed_reason = ?, completed_at = ? WHERE id = ? AND status = ?`,
		string(status), reason, now, string(j.ID), string(account.JobPending)))
	j.Status, j.FailedReason, j.CompletedAt = status, reason, fromNanos(now)
	return j, err
}

// JobBundle reads a job's bundle.
func (a *AccountTx) JobBundle(ctx context.Context, peer account.PeerID, id account.JobID) ([]byte, error) {
	var data []byte
	err := a.q().queryRow(ctx, `SELECT b.data FROM peer_job_bundles b JOIN peer_jobs j ON j.id = b.job_id
		WHERE b.job_id = ? AND b.account_id = ? AND j.peer_id = ?`, string(id), string(a.id), string(peer)).Scan(&data)
	return data, mapErr(err)
}

// SetJobSupport records whether the peer's agent uploads debug bundles to
// this server; it writes only when that changed.
func (a *AccountTx) SetJobSupport(ctx context.Context, peer account.PeerID, upload bool) error {
	_, err := a.q().exec(ctx, `INSERT INTO peer_job_support (peer_id, account_id, debug_bundle_upload) VALUES (?, ?, ?)
		ON CONFLICT (peer_id) DO UPDATE SET debug_bundle_upload = excluded.debug_bundle_upload
		WHERE peer_job_support.debug_bundle_upload <> excluded.debug_bundle_upload`, string(peer), string(a.id), upload)
	return mapErr(err)
}

// JobSupport reports whether the peer's agent said it uploads debug
// bundles to this server (false if it never said).
func (a *AccountTx) JobSupport(ctx context.Context, peer account.PeerID) (bool, error) {
	var ok bool
	err := a.q().queryRow(ctx, `SELECT debug_bundle_upload FROM peer_job_support WHERE peer_id = ? AND account_id = ?`, string(peer), string(a.id)).Scan(&ok)
	if err != nil {
		if err = mapErr(err); errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	return ok, nil
}

// PeersWithUndeliveredJobs lists the peers, of every account, that have
// pending jobs not yet handed to them.
func (tx *Tx) PeersWithUndeliveredJobs(ctx context.Context) ([]account.Peer, error) {
	return queryAll(ctx, tx.q, func(sc scanner) (account.Peer, error) {
		var p account.Peer
		var acc, id string
		if err := sc.Scan(&acc, &id); err != nil {
			return p, mapErr(err)
		}
		p.AccountID, p.ID = account.ID(acc), account.PeerID(id)
		return p, nil
	}, `SELECT DISTINCT account_id, peer_id FROM peer_jobs WHERE status = ? AND delivered_at = 0`, string(account.JobPending))
}

// FailStaleJobs fails pending jobs never handed over since
// undeliveredBefore, and those handed over before deliveredBefore without
// an answer, with the given reasons.
func (tx *Tx) FailStaleJobs(ctx context.Context, undeliveredBefore int64, undeliveredReason string, deliveredBefore int64, deliveredReason string, now int64) (int64, error) {
	n1, err := tx.q.exec(ctx, `UPDATE peer_jobs SET status = ?, failed_reason = ?, completed_at = ? WHERE status = ? AND delivered_at = 0 AND created_at < ?`,
		string(account.JobFailed), undeliveredReason, now, string(account.JobPending), undeliveredBefore)
	if err != nil {
		return 0, mapErr(err)
	}
	n2, err := tx.q.exec(ctx, `UPDATE peer_jobs SET status = ?, failed_reason = ?, completed_at = ? WHERE status = ? AND delivered_at <> 0 AND delivered_at < ?`,
		string(account.JobFailed), deliveredReason, now, string(account.JobPending), deliveredBefore)
	return n1 + n2, mapErr(err)
}

// DeleteBundlesBefore deletes bundles stored before t (at most limit of
// them, so one sweep stays short) and reports how many went.
func (tx *Tx) DeleteBundlesBefore(ctx context.Context, t int64, limit int) (int64, error) {
	n, err := tx.q.exec(ctx, `DELETE FROM peer_job_bundles WHERE job_id IN (SELECT job_id FROM peer_job_bundles WHERE created_at < ? ORDER BY created_at LIMIT ?)`, t, limit)
	return n, mapErr(err)
}

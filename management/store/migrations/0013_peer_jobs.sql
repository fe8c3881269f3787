-- Remote jobs (debug bundles) an admin asks a peer's agent to run. The job
-- is handed to the peer on its Job stream with a random upload token, of
-- which only the SHA-256 (hex) is kept; the agent uploads the bundle with
-- it once, while the job is pending. Bundles live in their own table so
-- that listing jobs never reads them.
CREATE TABLE peer_jobs (
  id            TEXT PRIMARY KEY,
  account_id    TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  peer_id       TEXT NOT NULL REFERENCES peers(id) ON DELETE CASCADE,
  triggered_by  TEXT NOT NULL,
  params        TEXT NOT NULL,
  status        TEXT NOT NULL,
  failed_reason TEXT NOT NULL DEFAULT '',
  created_at    BIGINT NOT NULL,
  delivered_at  BIGINT NOT NULL DEFAULT 0,
  completed_at  BIGINT NOT NULL DEFAULT 0,
  token_hash    TEXT UNIQUE,
  upload_key    TEXT NOT NULL DEFAULT '',
  uploaded_at   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX peer_jobs_by_peer ON peer_jobs (account_id, peer_id, created_at);
CREATE INDEX peer_jobs_pending ON peer_jobs (created_at) WHERE status = 'pending';

-- BYTEA: a binary string on Postgres; SQLite stores the bytes as given.
CREATE TABLE peer_job_bundles (
  job_id     TEXT PRIMARY KEY REFERENCES peer_jobs(id) ON DELETE CASCADE,
  account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  data       BYTEA NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE INDEX peer_job_bundles_age ON peer_job_bundles (created_at);

-- Whether the peer's agent announced (WiremeshCapabilities on Sync) that
-- it uploads debug bundles to this server. Official NetBird clients upload
-- to NetBird's cloud instead, so jobs are refused for them.
CREATE TABLE peer_job_support (
  peer_id             TEXT PRIMARY KEY REFERENCES peers(id) ON DELETE CASCADE,
  account_id          TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  debug_bundle_upload BOOLEAN NOT NULL
);

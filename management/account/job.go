package account

import "time"

// JobID identifies a remote job (public: it appears in REST paths).
type JobID string

// JobStatus is where a remote job stands.
type JobStatus string

// The job statuses, as the API spells them.
const (
	JobPending   JobStatus = "pending"
	JobSucceeded JobStatus = "succeeded"
	JobFailed    JobStatus = "failed"
)

// BundleParams say what a debug bundle holds: the logs of the last
// BundleForTime minutes when BundleFor is set, at most LogFileCount log
// files, anonymized or not.
type BundleParams struct {
	BundleFor     bool `json:"bundle_for"`
	BundleForTime int  `json:"bundle_for_time"`
	LogFileCount  int  `json:"log_file_count"`
	Anonymize     bool `json:"anonymize"`
}

// Job is a debug bundle an admin asked a peer's agent for. Its upload
// token is never kept, only its hash (in the store).
type Job struct {
	ID           JobID
	AccountID    ID
	PeerID       PeerID
	TriggeredBy  UserID
	Params       BundleParams
	Status       JobStatus
	FailedReason string
	CreatedAt    time.Time
	DeliveredAt  time.Time // zero until handed to the peer
	CompletedAt  time.Time // zero while pending
	UploadKey    string    // set once the bundle is uploaded
	UploadedAt   time.Time
}

package client

import (
	"bytes"
	"encoding/json"
	"time"
)

// The operator's health includes the console's Operations view reads (schemas/openapi.yaml
// Health). Each answers an object with Error alone when it could not be read.

// HealthNamespaces is health's `namespaces` (include=namespaces): every namespace of
// every org, Listed being up to 200 of Total (those behind the projection first).
type HealthNamespaces struct {
	Error  string              `json:"error,omitempty"`
	Total  int64               `json:"total"`
	Listed []NamespaceStanding `json:"listed"`
}

// NamespaceStanding is one namespace's Postgres generation, the serving projection's
// watermark and, in a process holding a search index, the index's position (IndexHeld
// false: evicted, served by ClickHouse).
type NamespaceStanding struct {
	Org              string `json:"org"`
	Namespace        string `json:"namespace"`
	Generation       int64  `json:"generation"`
	Watermark        int64  `json:"watermark"`
	ProjectionBehind int64  `json:"projection_behind"`
	IndexPosition    *int64 `json:"index_position,omitempty"`
	IndexBehind      *int64 `json:"index_behind,omitempty"`
	IndexHeld        *bool  `json:"index_held,omitempty"`
}

// HealthErasures is health's `erasures` (include=erasures): the sagas of every org by
// status (running, completed, failed) and the latest 20, newest first.
type HealthErasures struct {
	Error    string           `json:"error,omitempty"`
	ByStatus map[string]int64 `json:"by_status"`
	Latest   []ErasureSummary `json:"latest"`
}

// ErasureSummary is one saga as health lists it: never the user or namespace erased
// (the org's admin reads those with Erasure).
type ErasureSummary struct {
	Org          string           `json:"org"`
	ID           string           `json:"id"`
	Status       string           `json:"status"`
	Kind         string           `json:"kind"`
	Namespaces   int              `json:"namespaces"`
	Purge        bool             `json:"purge"`
	Attempts     int              `json:"attempts"`
	ResidueCount *int64           `json:"residue_count"`
	Census       map[string]int64 `json:"census"`
	Errored      bool             `json:"errored"`
	RequestedAt  time.Time        `json:"requested_at"`
	FinishedAt   *time.Time       `json:"finished_at"`
}

// HealthExtractions is health's `extractions` (include=extractions): the deferred
// extraction requests of every org by status, the oldest still owed and how many orgs
// owe one. Counts only.
type HealthExtractions struct {
	Error          string           `json:"error,omitempty"`
	ByStatus       map[string]int64 `json:"by_status"`
	OldestOwedAt   *time.Time       `json:"oldest_owed_at"`
	OldestOwedAgeS float64          `json:"oldest_owed_age_s"`
	OrgsOwing      int64            `json:"orgs_owing"`
}

// HealthTopic is health's `topic_latest` (include=topic): the change topic's latest 20
// records, newest first, or Error when the topic could not be read.
type HealthTopic struct {
	Error   string
	Records []TopicRecord
}

// UnmarshalJSON reads the records' array, or the {"error": …} object in its stead.
func (t *HealthTopic) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		var e struct {
			Error string `json:"error"`
		}
		err := json.Unmarshal(b, &e)
		t.Error = e.Error
		return err
	}
	return json.Unmarshal(b, &t.Records)
}

// TopicRecord is one record of the change topic: where it sits and its envelope's
// routing fields. Its content stays sealed (Sealed says it carries some).
type TopicRecord struct {
	Partition       int32     `json:"partition"`
	Offset          int64     `json:"offset"`
	Timestamp       time.Time `json:"timestamp"`
	Bytes           int       `json:"bytes"`
	EnvelopeVersion int       `json:"envelope_version,omitempty"`
	ID              string    `json:"id,omitempty"`
	Type            string    `json:"type,omitempty"`
	Org             string    `json:"org,omitempty"`
	Namespace       string    `json:"namespace,omitempty"`
	Seq             int64     `json:"seq,omitempty"`
	CommittedAt     time.Time `json:"committed_at,omitzero"`
	Sealed          bool      `json:"sealed"`
	Undecodable     bool      `json:"undecodable,omitempty"`
}

package memrow

import (
	"encoding/json"
	"strconv"
	"time"
)

// Statuses a row can hold.
const (
	StatusActive = "active"
)

// Identity names one key: a memory is identified by its namespace, its writer's
// identity tuple and its key, within an org.
type Identity struct {
	Org       string `json:"org"`
	Namespace string `json:"namespace"`
	Agent     string `json:"agent"`
	UserID    string `json:"user_id"`
	SessionID string `json:"session_id"`
	MemoryKey string `json:"memory_key"`
}

// Row is the complete memory row: what loom.memory_current holds as JSON, what a
// revision's payload is, and what a point read answers.
type Row struct {
	Identity
	MemoryID           string          `json:"memory_id"`
	Version            int64           `json:"version"`
	Seq                int64           `json:"seq"`
	MemoryType         string          `json:"memory_type"`
	Status             string          `json:"status"`
	Tombstone          bool            `json:"tombstone"`
	Value              json.RawMessage `json:"value"`
	ContentSHA256      string          `json:"content_sha256"`
	Tags               []string        `json:"tags"`
	Entities           []string        `json:"entities"`
	Confidence         float64         `json:"confidence"`
	ReinforcementCount int             `json:"reinforcement_count"`
	Actor              string          `json:"actor"`
	SourceClass        string          `json:"source_class"`
	EmbeddingModel     string          `json:"embedding_model"`
	EmbeddingDim       int             `json:"embedding_dim"`
	CreatedAt          time.Time       `json:"created_at"`
	UpdatedAt          time.Time       `json:"updated_at"`
}

// Live reports whether the row is served by point reads and search.
func (r *Row) Live() bool { return !r.Tombstone }

// VersionText is the version as a decimal string, exact for a JavaScript caller.
func VersionText(v int64) string { return strconv.FormatInt(v, 10) }

// NextVersion draws a version: wall-clock nanoseconds, strictly above the head's,
// so a head written on a host whose clock runs ahead is never overtaken.
func NextVersion(now time.Time, head int64) int64 {
	v := now.UnixNano()
	if v <= head {
		v = head + 1
	}
	return v
}

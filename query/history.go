package query

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/revisions"
)

// versionView is one entry of a key's history.
type versionView struct {
	Version            int64         `json:"version"`
	VersionText        string        `json:"version_text"`
	Seq                uint64        `json:"seq"`
	Event              string        `json:"event"`
	MemoryID           string        `json:"memory_id"`
	MemoryType         string        `json:"memory_type"`
	Status             memrow.Status `json:"status"`
	Tombstone          bool          `json:"tombstone"`
	Value              rawJSON       `json:"value"`
	ContentSHA256      string        `json:"content_sha256"`
	Tags               []string      `json:"tags"`
	ReinforcementCount uint32        `json:"reinforcement_count"`
	Actor              string        `json:"actor"`
	UpdatedAt          time.Time     `json:"updated_at"`
	// Redacted: memory.redact scrubbed this version; its value is null.
	Redacted bool `json:"redacted,omitempty"`
}

// rawJSON is a stored canonical value, answered as JSON rather than as a string.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) {
	if r == "" {
		return []byte("null"), nil
	}
	return []byte(r), nil
}

// historyAnswer is what memory.history answers.
type historyAnswer struct {
	Agent     string        `json:"agent"`
	Barrier   Passed        `json:"barrier"`
	MemoryKey string        `json:"memory_key"`
	Namespace string        `json:"namespace"`
	SessionID string        `json:"session_id"`
	UserID    string        `json:"user_id"`
	Versions  []versionView `json:"versions"`
}

// history is memory.history: every version of one key, oldest first, from the
// journal on the authority (loom.memory_revisions), so a write that answered is in it
// at once, with no wait for the projection. A redacted version is its scrubbed row; an
// erased one is gone. The barrier reports the namespace's generation read in the same
// round trip, and no wait.
func (s *Service) history(ctx context.Context, id memrow.Identity) (*historyAnswer, error) {
	var gen int64
	var journal []revisions.Version
	b := &pgx.Batch{}
	generations.QueueRead(b, id.Org, id.Namespace, &gen)
	revisions.QueueKeyVersions(b, id, &journal)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, httperr.Store("reading history", err)
	}
	if len(journal) == 0 {
		return nil, httperr.NotFound("memory not found")
	}
	versions := make([]versionView, len(journal))
	for i, j := range journal {
		versions[i] = versionOf(j)
	}
	return &historyAnswer{MemoryKey: id.MemoryKey, Namespace: id.Namespace, Agent: id.Agent, UserID: id.UserID,
		SessionID: id.SessionID, Versions: versions, Barrier: Passed{Generations: map[string]int64{id.Namespace: gen}}}, nil
}

// versionOf is a journal version as history answers it.
func versionOf(j revisions.Version) versionView {
	r := j.Row
	tags := r.Tags
	if tags == nil {
		tags = []string{}
	}
	return versionView{Version: r.Version, VersionText: memrow.VersionText(r.Version), Seq: uint64(r.Seq), Event: j.Event,
		MemoryID: r.MemoryID, MemoryType: r.MemoryType, Status: r.Status, Tombstone: r.Tombstone, Value: rawJSON(memrow.ServedValue(r.Value)),
		ContentSHA256: r.ContentSHA256, Tags: tags, ReinforcementCount: uint32(r.ReinforcementCount), Actor: r.Actor,
		UpdatedAt: r.UpdatedAt, Redacted: r.Redacted}
}

// chUnavailable answers a ClickHouse that cannot be reached, read past the barrier, as
// the seeds' retryable 503 PROJECTION_BEHIND (postgres-authority.md, Failure: "the
// reads that wait at the barrier in the namespace answer 503 PROJECTION_BEHIND until
// then"), and a statement it refused as the bug it is.
func chUnavailable(doing string, err error) error {
	if ch.Unavailable(err) {
		return httperr.Unavailable(httperr.CodeProjectionBehind, "ClickHouse does not answer while "+doing+": the read cannot be served past the barrier until it does; retry", err)
	}
	return httperr.Store(doing, err)
}

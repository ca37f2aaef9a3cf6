package query

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
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

// history is memory.history: every version of one key, oldest first, from ClickHouse
// behind the barrier, so a write that answered is in it.
func (s *Service) history(ctx context.Context, p auth.Principal, id memrow.Identity) (*historyAnswer, error) {
	passed, err := s.barrier.Wait(ctx, p.Org, []string{id.Namespace})
	if err != nil {
		return nil, err
	}
	rows, err := s.ch.Query(s.ch.Ctx(ctx), `SELECT version, seq, event_type, memory_id, memory_type, status, tombstone,
			value, content_sha256, tags, reinforcement_count, actor, updated_at, redacted
		FROM loom.memory_versions FINAL
		PREWHERE org = ? AND namespace = ? AND agent = ? AND user_id = ? AND session_id = ? AND memory_key = ?
		ORDER BY version`, id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey)
	if err != nil {
		return nil, chUnavailable("reading history", err)
	}
	defer rows.Close()
	versions := []versionView{}
	for rows.Next() {
		var v versionView
		var version uint64
		var tomb, redacted uint8
		var memoryID uuid.UUID
		var value, status string
		if err := rows.Scan(&version, &v.Seq, &v.Event, &memoryID, &v.MemoryType, &status, &tomb, &value,
			&v.ContentSHA256, &v.Tags, &v.ReinforcementCount, &v.Actor, &v.UpdatedAt, &redacted); err != nil {
			return nil, chUnavailable("reading history", err)
		}
		v.Version, v.VersionText, v.Tombstone = int64(version), memrow.VersionText(int64(version)), tomb == 1
		v.MemoryID, v.Value, v.Redacted, v.Status = memoryID.String(), rawJSON(value), redacted == 1, memrow.Status(status)
		if v.Tags == nil {
			v.Tags = []string{}
		}
		versions = append(versions, v)
	}
	if err := rows.Err(); err != nil {
		return nil, chUnavailable("reading history", err)
	}
	if len(versions) == 0 {
		return nil, httperr.NotFound("memory not found")
	}
	return &historyAnswer{MemoryKey: id.MemoryKey, Namespace: id.Namespace, Agent: id.Agent, UserID: id.UserID,
		SessionID: id.SessionID, Versions: versions, Barrier: passed}, nil
}

// chUnavailable answers a ClickHouse that cannot be reached as a retryable 503, and a
// statement it refused as the bug it is.
func chUnavailable(doing string, err error) error {
	return httperr.ClickHouse(doing, err, ch.Unavailable(err))
}

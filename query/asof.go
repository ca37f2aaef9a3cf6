package query

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// getAsOf is memory.get ?as_of: the key's version at a past time, the largest version
// at or before it (a version is a wall-clock nanosecond), from ClickHouse's history
// behind the barrier. A key deleted at that time is not found.
func (s *Service) getAsOf(ctx context.Context, p auth.Principal, id memrow.Identity, asOf string) (memoryView, error) {
	at, err := time.Parse(time.RFC3339Nano, asOf)
	if err != nil {
		return memoryView{}, httperr.Validation("as_of", "as_of must be an RFC 3339 time")
	}
	if at.Year() < 1970 || at.Year() > 2261 {
		return memoryView{}, httperr.Validation("as_of", "as_of must lie between 1970 and 2261")
	}
	if _, err := s.barrier.Wait(ctx, p.Org, []string{id.Namespace}); err != nil {
		return memoryView{}, err
	}
	rows, err := s.ch.Query(s.ch.Ctx(ctx), `SELECT memory_id, version, seq, memory_type, status, tombstone, value, content_sha256,
			tags, confidence, reinforcement_count, actor, source_class, pinned, locked, sensitivity, created_at, updated_at,
			valid_at, valid_to, expires_at, redacted
		FROM loom.memory_versions FINAL
		PREWHERE org = ? AND namespace = ? AND agent = ? AND user_id = ? AND session_id = ? AND memory_key = ?
		WHERE version <= ?
		ORDER BY version DESC LIMIT 1`,
		id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey, uint64(at.UnixNano()))
	if err != nil {
		return memoryView{}, chUnavailable("reading the key's history", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return memoryView{}, chUnavailable("reading the key's history", err)
		}
		return memoryView{}, httperr.NotFound("the memory did not exist at that time")
	}
	r := memrow.Row{Identity: id}
	var memoryID uuid.UUID
	var version, seq uint64
	var tomb, pinned, locked, redacted uint8
	var value string
	var confidence float32
	var reinforcement uint32
	var status, sensitivity string
	if err := rows.Scan(&memoryID, &version, &seq, &r.MemoryType, &status, &tomb, &value, &r.ContentSHA256, &r.Tags,
		&confidence, &reinforcement, &r.Actor, &r.SourceClass, &pinned, &locked, &sensitivity, &r.CreatedAt, &r.UpdatedAt,
		&r.ValidAt, &r.ValidTo, &r.ExpiresAt, &redacted); err != nil {
		return memoryView{}, chUnavailable("reading the key's history", err)
	}
	if tomb == 1 {
		return memoryView{}, httperr.NotFound("the memory was deleted at that time")
	}
	if r.Expired(at) {
		return memoryView{}, httperr.NotFound("the memory had expired at that time")
	}
	r.MemoryID, r.Version, r.Seq = memoryID.String(), int64(version), int64(seq)
	r.Status, r.Sensitivity = memrow.Status(status), memrow.Sensitivity(sensitivity)
	r.Value, r.Confidence, r.ReinforcementCount = json.RawMessage(value), float64(confidence), int(reinforcement)
	r.Pinned, r.Locked, r.Redacted = pinned == 1, locked == 1, redacted == 1
	if r.Redacted {
		r.Value = json.RawMessage("null")
	}
	return viewOf(&r), nil
}

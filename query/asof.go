package query

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// parseAsOf reads an as_of time.
func parseAsOf(asOf string) (time.Time, error) {
	at, err := time.Parse(time.RFC3339Nano, asOf)
	if err != nil {
		return at, httperr.Validation("as_of", "as_of must be an RFC 3339 time")
	}
	if at.Year() < 1970 || at.Year() > 2261 {
		return at, httperr.Validation("as_of", "as_of must lie between 1970 and 2261")
	}
	return at, nil
}

// getAsOf is memory.get ?as_of: the key's version at a past time, the largest version
// at or before it (a version is a wall-clock nanosecond), from ClickHouse's history
// behind the barrier. A key deleted at that time is not found.
func (s *Service) getAsOf(ctx context.Context, p auth.Principal, id memrow.Identity, asOf string) (memoryView, error) {
	at, err := parseAsOf(asOf)
	if err != nil {
		return memoryView{}, err
	}
	if _, err := s.barrier.Wait(ctx, p.Org, []string{id.Namespace}); err != nil {
		return memoryView{}, err
	}
	rows, err := s.ch.Query(s.ch.Ctx(ctx), `SELECT `+versionColumns+`
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
	if err := scanVersion(rows, &r); err != nil {
		return memoryView{}, chUnavailable("reading the key's history", err)
	}
	if r.Tombstone {
		return memoryView{}, httperr.NotFound("the memory was deleted at that time")
	}
	if r.Expired(at) {
		return memoryView{}, httperr.NotFound("the memory had expired at that time")
	}
	return viewOf(&r), nil
}

// versionColumns are the columns of loom.memory_versions scanVersion reads.
const versionColumns = `memory_id, version, seq, memory_type, status, tombstone, value, content_sha256,
	tags, confidence, reinforcement_count, actor, source_class, pinned, locked, sensitivity, created_at, updated_at,
	valid_at, valid_to, expires_at, redacted, recall_count, evidence_count`

// scanVersion reads versionColumns (after any columns dest already holds, such as
// the identity) into r; a redacted version's value is null.
func scanVersion(rows interface{ Scan(...any) error }, r *memrow.Row, dest ...any) error {
	var memoryID uuid.UUID
	var version, seq uint64
	var tomb, pinned, locked, redacted uint8
	var value string
	var confidence float32
	var reinforcement, recalls, evidence uint32
	var status, sensitivity string
	if err := rows.Scan(append(dest, &memoryID, &version, &seq, &r.MemoryType, &status, &tomb, &value, &r.ContentSHA256, &r.Tags,
		&confidence, &reinforcement, &r.Actor, &r.SourceClass, &pinned, &locked, &sensitivity, &r.CreatedAt, &r.UpdatedAt,
		&r.ValidAt, &r.ValidTo, &r.ExpiresAt, &redacted, &recalls, &evidence)...); err != nil {
		return err
	}
	r.MemoryID, r.Version, r.Seq = memoryID.String(), int64(version), int64(seq)
	r.Status, r.Sensitivity = memrow.Status(status), memrow.Sensitivity(sensitivity)
	r.Value, r.Confidence, r.ReinforcementCount, r.RecallCount = json.RawMessage(value), float64(confidence), int(reinforcement), int(recalls)
	r.EvidenceCount = int(evidence)
	r.Tombstone, r.Pinned, r.Locked, r.Redacted = tomb == 1, pinned == 1, locked == 1, redacted == 1
	if r.Redacted {
		r.Value = json.RawMessage("null")
	}
	return nil
}

// listAsOf is memory.list ?as_of: the namespace's memories as they were at a past
// time, each key's largest version at or before it, from ClickHouse's history behind
// the barrier (lr), filtered and paged as the list is. A key deleted or expired then
// is not listed; a redacted version is listed with a null value.
func (s *Service) listAsOf(ctx context.Context, ns string, lr *listRead, order string, at time.Time) (*listAnswer, error) {
	f := lr.f
	f.asOf, f.expiresAt = &at, &at
	pre, where, args := f.where(ns, true)
	where, args, orderBy := pageOf(where, args, order, lr.cur)
	identity := "agent, user_id, session_id, memory_key"
	q := fmt.Sprintf(`SELECT %[1]s, sk, %[2]s FROM (
			SELECT %[1]s, %[3]s AS sk, %[2]s FROM loom.memory_versions FINAL
			PREWHERE %[4]s WHERE version <= ?
			ORDER BY %[1]s, version DESC LIMIT 1 BY %[1]s)
		WHERE %[5]s ORDER BY %[6]s LIMIT ?`, identity, versionColumns, listSortKey, pre, where, orderBy)
	// The predicates' arguments: the identity prewhere's, then as_of, then the rest.
	npre := strings.Count(pre, "?")
	qargs := append(append(append([]any{}, args[:npre]...), uint64(at.UnixNano())), args[npre:]...)
	rows, err := s.ch.Query(s.ch.Ctx(ctx), q, append(qargs, lr.limit+1)...)
	if err != nil {
		return nil, chUnavailable("listing the namespace as of a time", err)
	}
	defer rows.Close()
	out := []memoryView{}
	var last listCursor
	more := false
	for rows.Next() {
		if len(out) == lr.limit {
			more = true
			break
		}
		r := memrow.Row{Identity: memrow.Identity{Org: f.org, Namespace: ns}}
		var sk string
		if err := scanVersion(rows, &r, &r.Agent, &r.UserID, &r.SessionID, &r.MemoryKey, &sk); err != nil {
			return nil, chUnavailable("listing the namespace as of a time", err)
		}
		out = append(out, viewOf(&r))
		last = listCursor{Order: order, Version: uint64(r.Version), Key: sk}
	}
	if err := rows.Err(); err != nil {
		return nil, chUnavailable("listing the namespace as of a time", err)
	}
	ans := &listAnswer{Memories: out, Barrier: lr.passed}
	if more {
		ans.NextPageToken = last.token()
	}
	return ans, nil
}

package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/rowseal"
	"github.com/loomplane/loom/internal/searchindex"
)

// memory.inspect is one memory's whole internal state, for an operator or a support
// engineer: its head (deleted or not), every version the journal holds, the links it
// holds to other memories (supersession, duplicates, conflicts, its promotion's
// provenance and its decision record), whether ClickHouse holds its search document
// and this process's search index has applied its head. It is a diagnostic: a
// ClickHouse that does not answer is named in skipped, not an error.

// inspectAnswer is what memory.inspect answers.
type inspectAnswer struct {
	Head       *memoryView      `json:"head"`
	Versions   []inspectVersion `json:"versions"`
	Links      inspectLinks     `json:"links"`
	Embeddings *inspectEmbed    `json:"embeddings"`
	Index      *inspectIndex    `json:"index"`
	Skipped    []string         `json:"skipped"`
}

// inspectVersion is one journal revision, without its text.
type inspectVersion struct {
	Version       int64         `json:"version"`
	VersionText   string        `json:"version_text"`
	Seq           int64         `json:"seq"`
	Status        memrow.Status `json:"status"`
	Tombstone     bool          `json:"tombstone"`
	Redacted      bool          `json:"redacted,omitempty"`
	ContentSHA256 string        `json:"content_sha256"`
	Actor         string        `json:"actor"`
	UpdatedAt     time.Time     `json:"updated_at"`
}

type inspectLinks struct {
	SupersededBy string             `json:"superseded_by,omitempty"`
	DuplicateOf  string             `json:"duplicate_of,omitempty"`
	ConflictWith []string           `json:"conflict_with"`
	Shared       *memrow.Provenance `json:"shared,omitempty"`
	Decision     *decisionRecord    `json:"decision_record,omitempty"`
}

// decisionRecord is a decision's record (decision.record) as inspect shows it.
type decisionRecord struct {
	DecidedBy  string     `json:"decided_by"`
	Supersedes []string   `json:"supersedes"`
	RecordedBy string     `json:"recorded_by"`
	RecordedAt time.Time  `json:"recorded_at"`
	RetiredAt  *time.Time `json:"retired_at,omitempty"`
}

type inspectEmbed struct {
	Present      bool   `json:"present"`
	Version      int64  `json:"version,omitempty"`
	Dim          int    `json:"embedding_dim,omitempty"`
	Model        string `json:"embedding_model,omitempty"`
	Tombstone    bool   `json:"tombstone,omitempty"`
	CurrentOfKey bool   `json:"current"` // ClickHouse's document is the head's version
}

type inspectIndex struct {
	Held     bool  `json:"held"`
	Position int64 `json:"position"`
	Applied  bool  `json:"head_applied"` // the index has applied the head's revision
}

// inspect is memory.inspect.
func (s *Service) inspect(ctx context.Context, p auth.Principal, id memrow.Identity) (*inspectAnswer, error) {
	if err := s.refuseDeleted(ctx, p.Org, id.Namespace); err != nil {
		return nil, err
	}
	head, err := heads.Read(ctx, s.pool, id)
	if err != nil {
		return nil, httperr.Store("reading the head", err)
	}
	if head == nil {
		return nil, httperr.NotFound("memory not found")
	}
	revs, err := heads.KeyRevisions(ctx, s.pool, id)
	if err != nil {
		return nil, httperr.Store("reading the journal", err)
	}
	view := viewOf(head)
	ans := &inspectAnswer{Head: &view, Versions: []inspectVersion{}, Skipped: []string{},
		Links: inspectLinks{SupersededBy: head.SupersededBy, DuplicateOf: head.DuplicateOf, ConflictWith: head.ConflictWith, Shared: head.Shared}}
	if ans.Links.ConflictWith == nil {
		ans.Links.ConflictWith = []string{}
	}
	for _, r := range revs {
		ans.Versions = append(ans.Versions, inspectVersion{Version: r.Version, VersionText: memrow.VersionText(r.Version), Seq: r.Seq,
			Status: r.Status, Tombstone: r.Tombstone, Redacted: r.Redacted, ContentSHA256: r.ContentSHA256, Actor: r.Actor, UpdatedAt: r.UpdatedAt})
	}
	if head.MemoryType == "decision" {
		if ans.Links.Decision, err = s.decisionRecordOf(ctx, id); err != nil {
			return nil, httperr.Store("reading the decision record", err)
		}
	}
	// As a diagnostic report, it starts at the barrier, and a wait that runs out does
	// not fail it: it reads what ClickHouse holds and names the projection in skipped.
	if _, err := s.barrier.Wait(ctx, p.Org, []string{id.Namespace}); err != nil {
		ans.Skipped = append(ans.Skipped, "projection")
	}
	if emb, err := s.embeddingOf(ctx, id, head.Version); err != nil {
		ans.Skipped = append(ans.Skipped, "clickhouse")
	} else {
		ans.Embeddings = emb
	}
	if s.index != nil {
		sp := searchindex.Space{Org: id.Org, Namespace: id.Namespace}
		ix := &inspectIndex{Held: s.index.Held(sp), Position: s.index.Position(sp)}
		ix.Applied = ix.Held && ix.Position >= head.Seq
		ans.Index = ix
	} else {
		ans.Skipped = append(ans.Skipped, "index")
	}
	return ans, nil
}

// decisionRecordOf reads a decision's record (loom.decision_records, which the write
// side writes: command/decision_records_store.go); nil when it has none. The record
// names its key, agent and session by reference, and seals who decided and what it
// supersedes under its own data key (migration 174).
func (s *Service) decisionRecordOf(ctx context.Context, id memrow.Identity) (*decisionRecord, error) {
	var r decisionRecord
	var sealed, dataKey []byte
	err := s.pool.QueryRow(ctx, `SELECT sealed, data_key, recorded_by, recorded_at, retired_at FROM loom.decision_records
		WHERE (org, namespace, agent, user_id, session_id, memory_key) = (SELECT $1, $2, w[2], loom.user_ref($1, $4), w[3], w[1]
			FROM (SELECT loom.writer_refs($1, $6, $3, $5) AS w OFFSET 0) r)`,
		id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey).Scan(&sealed, &dataKey, &r.RecordedBy, &r.RecordedAt, &r.RetiredAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	key, err := kek.OpenKey(s.kek, dataKey)
	if err != nil {
		return nil, fmt.Errorf("open the decision record's data key: %w", err)
	}
	plain, err := rowseal.Open(key, rowseal.LabelDecision, sealed)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(plain, &struct {
		DecidedBy  *string   `json:"decided_by"`
		Supersedes *[]string `json:"supersedes"`
	}{&r.DecidedBy, &r.Supersedes}); err != nil {
		return nil, fmt.Errorf("decode the decision's record: %w", err)
	}
	return &r, nil
}

// embeddingOf reads the key's search document as ClickHouse holds it.
func (s *Service) embeddingOf(ctx context.Context, id memrow.Identity, headVersion int64) (*inspectEmbed, error) {
	rows, err := s.ch.Query(s.ch.Ctx(ctx), `SELECT version, embedding_dim, embedding_model, tombstone FROM loom.memory_embeddings FINAL
		PREWHERE org = ? AND namespace = ? AND agent = ? AND user_id = ? AND session_id = ? AND memory_key = ?`,
		id.Org, id.Namespace, id.Agent, id.UserID, id.SessionID, id.MemoryKey)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	e := &inspectEmbed{}
	for rows.Next() {
		var version uint64
		var dim uint16
		var tomb uint8
		if err := rows.Scan(&version, &dim, &e.Model, &tomb); err != nil {
			return nil, err
		}
		e.Present, e.Version, e.Dim, e.Tombstone = true, int64(version), int(dim), tomb == 1
		e.CurrentOfKey = int64(version) == headVersion
	}
	return e, rows.Err()
}

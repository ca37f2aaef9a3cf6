package command

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/idempotency"
	"github.com/loomplane/loom/internal/memrow"
)

// Memory's writes run under their Idempotency-Key through internal/idempotency, which
// owns loom.idempotency; what is memory's own is here: what a replay of a committed
// request names, and which answers committed nothing.

// Codes of the idempotency table.
const (
	CodeIdempotentConflict   = idempotency.CodeConflict   // 409: the key was used for another request
	CodeIdempotentInProgress = idempotency.CodeInProgress // 503: the key's request is still running
	CodeIdempotentTakenOver  = idempotency.CodeTakenOver  // 503: a retry took this request's key over
)

// committedRevision is what a replay of a committed request names.
type committedRevision struct {
	MemoryID      string `json:"memory_id"`
	MemoryKey     string `json:"memory_key"`
	Version       int64  `json:"version"`
	VersionText   string `json:"version_text"`
	ContentSHA256 string `json:"content_sha256"`
}

// origin is what a write carries from its request to its commit: the request id its
// audit rows name, and its hold on its Idempotency-Key (nil without one), which the
// commit marks committed.
type origin struct {
	requestID string
	hold      *idempotency.Hold
}

// writeAnswer is what a write answers. A write that committed nothing (a merge, a dry
// run, a pin of a pinned row) releases its Idempotency-Key, so a retry judges again.
type writeAnswer interface {
	committed() bool
	outcome() string // the metrics label
}

// newIdempotency is the store memory's writes run under their keys with.
func (s *Service) newIdempotency() *idempotency.Store {
	return idempotency.New(s.pool, idempotency.Options{
		Lease: s.cfg.IdempotencyLease,
		Committed: func(ans any) bool {
			wa, ok := ans.(writeAnswer)
			return !ok || wa.committed()
		},
		ReplayCommitted: committedReplay,
		Keys:            s.kek,
	}, s.log)
}

// idempotent runs a write under its Idempotency-Key, when the request has one.
func (s *Service) idempotent(ctx context.Context, k idempotency.Key, run func(hold *idempotency.Hold) (any, error)) (idempotency.Reply, error) {
	return s.idem.Run(ctx, k, run)
}

// committedReplay answers a request that committed but did not store its answer: the
// revisions its commit recorded.
func committedReplay(revisions []byte) ([]byte, error) {
	var revs []committedRevision
	if err := json.Unmarshal(revisions, &revs); err != nil {
		return nil, fmt.Errorf("decode committed revisions: %w", err)
	}
	ans := map[string]any{"idempotent_replay": "committed", "written": revs}
	if len(revs) > 0 {
		ans["memory_id"], ans["memory_key"], ans["version"] = revs[0].MemoryID, revs[0].MemoryKey, revs[0].Version
		ans["version_text"], ans["content_sha256"] = revs[0].VersionText, revs[0].ContentSHA256
	}
	return json.Marshal(ans)
}

// queueMark queues the mark of the plan's Idempotency-Key: its answer stored, done,
// when the plan has its answer by now, else committed with its revisions.
func queueMark(b *pgx.Batch, p *commitPlan) error {
	if p.answer != nil && p.idem != nil {
		return idempotency.QueueDone(b, p.idem, p.answer())
	}
	return queueCommitted(b, p.idem, p.rows)
}

// queueCommitted queues the mark of the key committed in the commit's writes batch,
// under the request's token, whose row the commit's first batch locked
// (idempotency.QueueLock).
func queueCommitted(b *pgx.Batch, hold *idempotency.Hold, rows []*pending) error {
	var revs []committedRevision
	for _, p := range rows {
		if !p.own {
			continue
		}
		r := p.row
		revs = append(revs, committedRevision{MemoryID: r.MemoryID, MemoryKey: r.MemoryKey, Version: r.Version,
			VersionText: memrow.VersionText(r.Version), ContentSHA256: r.ContentSHA256})
	}
	return idempotency.QueueCommitted(b, hold, revs)
}

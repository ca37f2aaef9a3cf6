package workers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/revisions"
)

// The embedding worker (memory-architecture, "Background passes", embedding_worker):
// its consumer group queues every revision committed as an embedding stub (a
// namespace.restore, namespace.rollback or memory.restore that ran while the embedder
// was down: command/embed_stub.go); a pass embeds the head's value and commits its
// vectors as an amendment of that head (pending.amends: a seq and a topic record of
// its own, the head's version kept), so the search index, the projections and every
// consumer learn the vector from the topic as they learn any revision's. A head that
// moved since (a write carries its own vector; a copy writer's stub is queued in its
// own right) is left, and the queue row is the version's stamp: a replay of the group
// embeds nothing twice. An embedder still down leaves the rows owed, due again after
// the pass's interval. No model call, so no provider is needed.

const opFillEmbedding = "memory.fill_embedding"

const embeddingActor = "worker:embedding_worker"

// RunEmbeddingWorker runs the embedding worker's passes until ctx ends.
func (s *Service) RunEmbeddingWorker(ctx context.Context) {
	cfg := s.cfg.Embedding
	s.runPasses(ctx, workerEmbedding, cfg.Interval, cfg.MaxAge+24*time.Hour, s.embedPass)
}

// stubRevision is the embedding worker's pick from a revision's plain fields: a live
// row of a searchable type and tier committed without a vector.
func stubRevision(env *events.Envelope) bool {
	rev := env.Revision
	return rev != nil && !rev.Tombstone && rev.EmbeddingDim == 0 &&
		memrow.Sensitivity(rev.Sensitivity) != memrow.SensitivityHigh && !memrow.NonSearchableTypes[rev.MemoryType]
}

// pickStubs queues the stubs whose content opens and holds a value (a redacted row's
// holds none).
func (s *Service) pickStubs(ctx context.Context, envs []*events.Envelope) ([]workItem, error) {
	keys, err := revisions.FetchKeys(ctx, s.pool, envs)
	if err != nil {
		return nil, err
	}
	opened, _, _ := revisions.Open(envs, keys)
	var items []workItem
	for _, o := range opened {
		if len(o.Content.Value) > 0 && o.Env.CommittedAt.After(s.now().Add(-s.cfg.Embedding.MaxAge)) {
			items = append(items, itemOf(workerEmbedding, o.Env))
		}
	}
	return items, nil
}

// embedPass fills one batch of stubs, one at a time: a stub is one embedder call and
// one commit, and an embedder that is down ends the pass with the rest given back.
func (s *Service) embedPass(ctx context.Context) passResult {
	cfg := s.cfg.Embedding
	items, res, ok := s.claimPass(ctx, workerEmbedding, cfg.Batch, cfg.MaxAge, false)
	if !ok {
		return res
	}
	down := false
	for _, it := range items {
		if down || ctx.Err() != nil {
			s.giveBack(it, s.soon(workerEmbedding), false)
			continue
		}
		out, err := s.fillStub(ctx, it)
		switch {
		case errors.Is(err, embed.ErrEmbedderUnavailable):
			down = true
			res.errors++
			s.giveBack(it, s.soon(workerEmbedding), false)
		case err != nil:
			if ctx.Err() == nil {
				s.log.Warn("embedding worker: a stub stays owed", "org", it.org, "namespace", it.namespace, "memory_id", it.memoryID, "err", err)
			}
			res.errors++
			s.giveBack(it, s.soon(workerEmbedding), true)
		default:
			if s.stamp(ctx, it, out, nil) == judgeDone {
				res.done++
			} else {
				res.errors++
			}
		}
	}
	if down {
		s.log.Info("embedding worker: the embedder is unavailable; the stubs stay owed", "owed", len(items)-res.done)
	}
	return res
}

// fillStub embeds a stub's head and commits its vectors over it; the outcome is
// embedded, or skipped when the head no longer is the stub queued.
func (s *Service) fillStub(ctx context.Context, it workItem) (string, error) {
	for try := 0; try < 3; try++ {
		h, err := s.headOfID(ctx, it.org, it.namespace, it.memoryID)
		if err != nil {
			return "", err
		}
		if h == nil || h.Version != it.version || !command.IsStub(h) {
			return outcomeSkipped, nil
		}
		prev, event, err := amendedRevision(ctx, s.pool, h.Identity, h.Version)
		if err != nil {
			return "", err
		}
		row := command.CopyOf(h)
		row.Actor = embeddingActor
		wr := command.WorkerRow{Op: opFillEmbedding, Event: event, Row: row, ReadVersion: h.Version, ReadSeq: h.Seq,
			Amends: true, PrevVersion: prev}
		if err := s.cmd.EmbedWorkerRow(ctx, &wr); err != nil {
			return "", fmt.Errorf("embed the stub: %w", err)
		}
		err = s.cmd.CommitWorkerPlan(ctx, command.WorkerPlan{Org: h.Org, Namespace: h.Namespace,
			RequestID: fmt.Sprintf("embedding_worker:%s/%d", h.MemoryID, h.Version),
			Rows:      []command.WorkerRow{wr}, InTx: refuseUnderErasure(h.Org)})
		switch {
		case errors.Is(err, command.ErrHeadMoved):
			continue
		case err != nil:
			return "", fmt.Errorf("commit the stub's vectors: %w", err)
		}
		return outcomeEmbedded, nil
	}
	return outcomeSkipped, nil
}

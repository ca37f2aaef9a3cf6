package command

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/graph"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/periodic"
)

// Expiry is the writer's choice (ttl_seconds, valid_to, retention). Reads hide an
// expired row at once; the sweep then applies its on_expire as a revision, over the
// head it read, so a write that lands meanwhile wins and the sweep takes the next pass.

// anonymizedValue replaces an anonymized row's value.
var anonymizedValue = []byte(`"[anonymized]"`)

// sweepScope narrows a sweep; empty fields sweep every org, namespace and user.
type sweepScope struct{ org, namespace, userID string }

// SweepExpired applies on_expire to up to limit expired heads and returns how many it
// changed.
func (s *Service) SweepExpired(ctx context.Context, limit int) (int, error) {
	return s.sweepExpired(ctx, sweepScope{}, limit)
}

func (s *Service) sweepExpired(ctx context.Context, scope sweepScope, limit int) (int, error) {
	expired, err := heads.Expired(ctx, s.pool, scope.org, scope.namespace, scope.userID, limit)
	if err != nil {
		return 0, fmt.Errorf("find expired heads: %w", err)
	}
	done := 0
	for _, h := range expired {
		p := expireRevision(h, s.now())
		err := s.commit(ctx, &commitPlan{org: h.Org, namespace: h.Namespace, policyGeneration: -1, rows: []*pending{p}})
		switch {
		case errors.Is(err, errHeadMoved), errors.Is(err, errErased):
			continue // written or erased meanwhile: the next pass judges what is left
		case err != nil:
			return done, fmt.Errorf("expire %s/%s: %w", h.Namespace, h.MemoryKey, err)
		}
		done++
	}
	return done, nil
}

// expireRevision is the revision an expired head's on_expire writes.
func expireRevision(h *memrow.Row, now time.Time) *pending {
	r := copyOf(h)
	r.Actor = "process:loom"
	p := &pending{own: true, op: graph.OpExpire, row: r, readVersion: h.Version, readSeq: h.Seq}
	switch h.OnExpire {
	case ExpireDemote:
		// The row stays, less trusted, and no longer expires.
		r.ExpiresAt, r.OnExpire, r.ValidTo = nil, "", nil
		r.Confidence = h.Confidence * 0.5
		p.event = events.TypeStatusChanged
	case ExpireAnonymize:
		// The shell row stays; its text and its search document go.
		r.Value, r.ContentSHA256 = anonymizedValue, memrow.ContentSHA256(anonymizedValue)
		r.Tags, r.Entities, r.ExpiresAt, r.OnExpire, r.ValidTo = []string{}, []string{}, nil, "", nil
		r.EntityTypes, r.Relations = nil, nil
		r.EmbeddingDim, r.EmbeddingModel = 0, ""
		p.event = events.TypeRevised
	default:
		r.Tombstone = true
		p.event = events.TypeTombstoned
	}
	return p
}

// sweepAnswer is what memory.sweep_expired answers.
type sweepAnswer struct {
	Expired int `json:"expired"`
}

// sweepNamespace is memory.sweep_expired for one namespace (admin), within the token's
// read scope.
func (s *Service) sweepNamespace(ctx context.Context, p auth.Principal, ns string) (*sweepAnswer, error) {
	n, err := s.sweepExpired(ctx, sweepScope{org: p.Org, namespace: ns, userID: p.ReadUserID}, 10000)
	if err != nil {
		return nil, commitError(err)
	}
	return &sweepAnswer{Expired: n}, nil
}

// RunSweeps runs the expiry, idempotency and erasure sweeps every interval until ctx ends.
// Every process with the command role runs them: each change commits over the head it
// read, so two sweepers never apply one expiry twice.
func (s *Service) RunSweeps(ctx context.Context, interval time.Duration) {
	periodic.Every(ctx, interval, func() {
		if n, err := s.SweepExpired(ctx, 1000); err != nil && ctx.Err() == nil {
			s.log.Warn("expiry sweep failed", "err", err)
		} else if n > 0 {
			s.log.Info("expiry sweep applied on_expire", "rows", n)
		}
		if _, err := s.idem.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("idempotency sweep failed", "err", err)
		}
		if err := s.sweepErasures(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("erasure sweep failed", "err", err)
		}
	})
}

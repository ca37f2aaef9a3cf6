package workers

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/memrow"
)

// The cluster (memory-architecture, "The cluster"): up to MaxPeers live peers of the
// judged row's type in its subject, nearest first, at the resolver's floor or above.
// The places go to the rows it is flagged against first, then to its key held in
// other sessions of its user (at most half the places; never for the anonymous user,
// whose sessions are separate tasks), then to the nearest rows, which the write side's
// peer read gives (readPeers), so the resolver reads peers as admission does. A
// pinned row is never a peer, nor is a high one: its value never reaches the model.

// cluster reads the judged row's peers.
func (s *Service) cluster(ctx context.Context, judged *memrow.Row) ([]clusterPeer, error) {
	cfg := s.cfg.Resolver
	now := s.now()
	isPeer := func(r *memrow.Row) bool {
		return r.MemoryID != judged.MemoryID && r.Identity != judged.Identity && command.SameSubject(r, judged) &&
			r.MemoryType == judged.MemoryType && r.Served(now) && !r.Pinned
	}
	vector := s.cmd.VectorOf(judged)
	var flags, sameKey []*memrow.Row
	var err error
	if len(judged.ConflictWith) > 0 {
		if flags, err = s.headsByID(ctx, judged.Org, judged.Namespace, judged.ConflictWith); err != nil {
			return nil, err
		}
	}
	if !command.Anonymous(judged.UserID) {
		if sameKey, err = s.keyElsewhere(ctx, judged); err != nil {
			return nil, err
		}
	}
	// One embedder call for the judged row (unless this process wrote it) and the rows
	// the vector read does not measure.
	var measure []*memrow.Row
	for _, r := range append(append([]*memrow.Row(nil), flags...), sameKey...) {
		if isPeer(r) {
			measure = append(measure, r)
		}
	}
	texts := make([]string, 0, len(measure)+1)
	if vector == nil {
		texts = append(texts, memrow.ValueText(judged.Value))
	}
	for _, r := range measure {
		texts = append(texts, memrow.ValueText(r.Value))
	}
	cos := map[string]float64{}
	if len(texts) > 0 {
		vs, err := s.embedder.Embed(ctx, texts)
		if err != nil {
			return nil, fmt.Errorf("embed the cluster: %w", err)
		}
		if vector == nil {
			vector, vs = vs[0], vs[1:]
		}
		for i, r := range measure {
			cos[r.MemoryID] = embed.Dot(vector, vs[i])
		}
	}
	out := make([]clusterPeer, 0, cfg.MaxPeers)
	taken := map[string]bool{}
	add := func(r *memrow.Row, c float64) {
		if len(out) < cfg.MaxPeers && !taken[r.MemoryID] && isPeer(r) {
			taken[r.MemoryID] = true
			out = append(out, clusterPeer{row: r, cosine: c})
		}
	}
	for _, r := range flags {
		add(r, cos[r.MemoryID]) // a flag is judged whatever its cosine
	}
	sortRowsBy(sameKey, cos)
	half := len(out) + cfg.MaxPeers/2
	for _, r := range sameKey {
		if len(out) >= half {
			break
		}
		add(r, cos[r.MemoryID])
	}
	// From ClickHouse: the judgement waited for the projection to hold the row's seq,
	// and no index position was captured for it.
	near, err := s.cmd.NearestPeers(ctx, judged.Identity, judged.MemoryType, judged.UserID, vector)
	if err != nil {
		return nil, fmt.Errorf("read the nearest rows: %w", err)
	}
	for _, p := range near {
		if p.Cosine >= cfg.MinSimilarity {
			add(p.Row, p.Cosine)
		}
	}
	return out, nil
}

// headsByID reads the heads of memory ids in one namespace.
func (s *Service) headsByID(ctx context.Context, org, ns string, ids []string) ([]*memrow.Row, error) {
	valid := make([]string, 0, len(ids))
	for _, id := range ids {
		if u, err := uuid.Parse(id); err == nil {
			valid = append(valid, u.String())
		}
	}
	out, err := heads.InNamespaceWithIDs(ctx, s.pool, org, ns, valid)
	if err != nil {
		return nil, fmt.Errorf("read heads by id: %w", err)
	}
	return out, nil
}

// headOfID is the head of one memory id in a namespace, nil when none.
func (s *Service) headOfID(ctx context.Context, org, ns, id string) (*memrow.Row, error) {
	hs, err := s.headsByID(ctx, org, ns, []string{id})
	if err != nil || len(hs) == 0 {
		return nil, err
	}
	return hs[0], nil
}

// keyElsewhere reads the judged row's key held by other sessions of its user.
func (s *Service) keyElsewhere(ctx context.Context, judged *memrow.Row) ([]*memrow.Row, error) {
	out, err := heads.InOtherSessions(ctx, s.pool, judged.Identity)
	if err != nil {
		return nil, fmt.Errorf("read the key in other sessions: %w", err)
	}
	return out, nil
}

func sortRowsBy(rs []*memrow.Row, cos map[string]float64) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && cos[rs[j].MemoryID] > cos[rs[j-1].MemoryID]; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// assertedAt is when a row's value was first asserted (memory-architecture, "Which row
// is older"): the version that began the current run of its journal holding its
// content hash, so a pin, a tag change or an Undo does not move it; a value that came
// back after a retirement by a write, not an Undo, is asserted anew. An explicit
// valid_at earlier than that moves it back: the fact held then. A row the journal
// does not hold counts from its current version.
func (s *Service) assertedAt(ctx context.Context, r *memrow.Row) (time.Time, error) {
	journal, err := command.MemoryJournal(ctx, s.pool, r)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the row's journal: %w", err)
	}
	first := r.Version
	prevStatus, prevOp := "", ""
	started := false
	for _, j := range journal {
		if j.ContentSHA256 != r.ContentSHA256 {
			break
		}
		if started && j.Status == string(memrow.StatusSuperseded) && prevStatus != string(memrow.StatusSuperseded) && prevOp != command.OpUnsupersede {
			break // the newer version restated a retired value: a statement of its own
		}
		first, prevStatus, prevOp, started = j.Version, j.Status, j.Op, true
	}
	at := time.Unix(0, first).UTC()
	if r.ValidAt != nil && r.ValidAt.Before(at) {
		at = r.ValidAt.UTC()
	}
	return at, nil
}

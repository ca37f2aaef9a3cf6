package command

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
)

// memory.consolidate (memory-architecture, "Background passes"): an admin's operation,
// not a pass. It clusters a scope's similar active memories (cosine over the vectors
// ClickHouse stores, raised when two name an entity in common; never a redacted,
// pinned or locked row, never a suppression with a positive one, one subject and type
// per cluster: consolidate_cluster.go), asks the model once per cluster for one
// summary, and commits each cluster in one transaction: the summary (tagged
// consolidated and src:<key> for each source, its derived_from lineage in the answer
// and the run) and a tombstone of each merged row, superseded by the summary, over
// the head the merge read. A merged row that moved since the read refuses the whole
// cluster (held_since_read); the others still merge. Each run is logged in
// loom.consolidation_runs (consolidation_runs_store.go), cluster by cluster in the
// transactions that commit them, and undone by memory.consolidate_undo. A dry run
// answers the clusters and makes no model call.

const (
	opConsolidate     = "memory.consolidate"
	opConsolidateUndo = "memory.consolidate_undo"
)

// ConsolidateRequest is memory.consolidate's body.
type ConsolidateRequest struct {
	// UserID limits the run to one user's memories; empty: every user's (a token
	// bound to one user may not).
	UserID        string   `json:"user_id"`
	DryRun        bool     `json:"dry_run"`
	MinSimilarity *float64 `json:"min_similarity"`
	MaxClusters   *int     `json:"max_clusters"`
}

// ConsolidateAnswer is memory.consolidate's answer.
type ConsolidateAnswer struct {
	RunID      string        `json:"run_id,omitempty"`
	DryRun     bool          `json:"dry_run"`
	Candidates int           `json:"candidates"`
	Clusters   []ClusterView `json:"clusters"`
	ModelCalls int           `json:"model_calls"`
	MergedRows int           `json:"merged_rows"`
	// ModelCallsPerMergedRow is the run's model calls over the rows it merged (0 when
	// it merged none).
	ModelCallsPerMergedRow float64          `json:"model_calls_per_merged_row"`
	Failures               []clusterFailure `json:"failures"`
}

// ClusterView is one cluster: its members and, once merged, its summary.
type ClusterView struct {
	Status  string       `json:"status"` // proposed (dry run), merged, failed
	Members []MemberView `json:"members"`
	Summary *SummaryView `json:"summary,omitempty"`
}

// MemberView is a memory of a cluster.
type MemberView struct {
	MemoryID  string `json:"memory_id"`
	MemoryKey string `json:"memory_key"`
	Agent     string `json:"agent"`
	UserID    string `json:"user_id"`
	Version   int64  `json:"version"`
}

// SummaryView is a cluster's summary memory.
type SummaryView struct {
	MemoryID    string   `json:"memory_id"`
	MemoryKey   string   `json:"memory_key"`
	Version     int64    `json:"version"`
	VersionText string   `json:"version_text"`
	DerivedFrom []string `json:"derived_from"` // the merged memories' ids
}

// clusterFailure is a cluster a run did not merge, and why: key_taken, embed_failed,
// held_since_read, erased, model_failed.
type clusterFailure struct {
	Cluster int    `json:"cluster"`
	Reason  string `json:"reason"`
	Key     string `json:"key,omitempty"`
}

var consolidationSchema = llm.MustSchema("consolidated_memory", "One memory that states what a cluster of memories states.", map[string]any{
	"type": "object", "additionalProperties": false, "required": []string{"key", "summary"},
	"properties": map[string]any{
		"key":     map[string]any{"type": "string", "description": "a short key for the merged memory, in the style of the cluster's keys"},
		"summary": map[string]any{"type": "string", "description": "one memory stating everything the cluster states, newest first where they differ"},
	},
})

const consolidationRubric = `Merge these stored memories of one user into one memory that states everything they state, without repeating it. Where they differ, the newer (listed first) holds. Keep names, numbers and dates exactly. Give the merged memory a short key.`

// consolidationValueChars is how much of one memory the prompt shows.
const consolidationValueChars = 2000

// consolidate is memory.consolidate.
func (s *Service) consolidate(ctx context.Context, p auth.Principal, ns string, req ConsolidateRequest) (*ConsolidateAnswer, error) {
	cfg := s.cfg.Consolidate
	minSim, maxClusters := cfg.MinSimilarity, cfg.MaxClusters
	if req.MinSimilarity != nil {
		if *req.MinSimilarity <= 0 || *req.MinSimilarity > 1 {
			return nil, httperr.Validation("min_similarity", "min_similarity must be in (0, 1]")
		}
		minSim = *req.MinSimilarity
	}
	if req.MaxClusters != nil {
		if *req.MaxClusters < 1 || *req.MaxClusters > cfg.MaxClusters {
			return nil, httperr.Validation("max_clusters", fmt.Sprintf("max_clusters must be 1 to %d", cfg.MaxClusters))
		}
		maxClusters = *req.MaxClusters
	}
	if err := consolidationScope(p, req.UserID); err != nil {
		return nil, err
	}
	bill := llm.Bill{Org: p.Org, Namespace: ns, Purpose: llm.PurposeConsolidation}
	if !req.DryRun {
		if err := s.checkModels(ctx, bill); err != nil {
			return nil, err
		}
	}
	cands, err := s.consolidationCandidates(ctx, p.Org, ns, req.UserID)
	if err != nil {
		return nil, err
	}
	clusters := clusterCandidates(cands, minSim, cfg.MaxCluster, maxClusters)
	ans := &ConsolidateAnswer{DryRun: req.DryRun, Candidates: len(cands), Clusters: []ClusterView{}, Failures: []clusterFailure{}}
	for _, c := range clusters {
		ans.Clusters = append(ans.Clusters, ClusterView{Status: "proposed", Members: membersOf(c)})
	}
	if req.DryRun || len(clusters) == 0 {
		return ans, nil
	}
	ans.RunID = uuid.NewString()
	if err := startRun(ctx, s.pool, ans.RunID, p.Org, ns, req.UserID, p.Actor()); err != nil {
		return nil, httperr.Store("logging the consolidation run", err)
	}
	taken := map[string]bool{} // the summary keys this run wrote
	for i, c := range clusters {
		view := &ans.Clusters[i]
		summary, reason, key, calls := s.mergeCluster(ctx, p, bill, ans.RunID, c, taken)
		ans.ModelCalls += calls
		if reason != "" {
			view.Status = "failed"
			ans.Failures = append(ans.Failures, clusterFailure{Cluster: i, Reason: reason, Key: key})
			continue
		}
		view.Status, view.Summary = "merged", summary
		ans.MergedRows += len(c)
	}
	if ans.MergedRows > 0 {
		ans.ModelCallsPerMergedRow = float64(ans.ModelCalls) / float64(ans.MergedRows)
	}
	s.consolidation.With("model_calls").Add(float64(ans.ModelCalls))
	s.consolidation.With("merged_rows").Add(float64(ans.MergedRows))
	s.consolidation.With("summaries").Add(float64(len(clusters) - len(ans.Failures)))
	s.consolidation.With("failed_clusters").Add(float64(len(ans.Failures)))
	if err := finishRun(context.WithoutCancel(ctx), s.pool, ans.RunID, ans.ModelCalls, ans.Failures); err != nil {
		return nil, httperr.Store("logging the consolidation run", err)
	}
	return ans, nil
}

// consolidationScope checks who may consolidate which rows: every user's needs a token
// that reaches every user; one user's, a token that acts on that user.
func consolidationScope(p auth.Principal, userID string) error {
	if userID == "" {
		return p.RequireEveryUser("consolidating every user's memories")
	}
	if !p.ActsOn(userID) {
		return httperr.New(403, httperr.CodePermissionDenied, "this token acts on another user's memories only")
	}
	return nil
}

// consolidationCandidates reads the scope's heads that may merge, with their stored
// vectors; a head whose search document ClickHouse does not hold yet (or holds for
// another value) is embedded here.
func (s *Service) consolidationCandidates(ctx context.Context, org, ns, userID string) ([]consolidationCandidate, error) {
	now := s.now()
	rows, err := heads.OfUser(ctx, s.pool, org, ns, userID, s.cfg.Consolidate.MaxRows, `NOT (row->>'tombstone')::boolean`)
	if err != nil {
		return nil, httperr.Store("reading the memories to consolidate", err)
	}
	rows = slices.DeleteFunc(rows, func(r *memrow.Row) bool { return !mayConsolidate(r, now) })
	stored, err := s.storedVectors(ctx, org, ns, userID)
	if err != nil {
		return nil, httperr.ClickHouse("reading the stored vectors", err, true)
	}
	cands := make([]consolidationCandidate, len(rows))
	var missing []int
	for i, r := range rows {
		cands[i] = consolidationCandidate{row: r, vector: stored[r.Agent+"\x00"+r.UserID+"\x00"+r.SessionID+"\x00"+r.MemoryKey+"\x00"+r.ContentSHA256]}
		if cands[i].vector == nil {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		texts := make([]string, len(missing))
		for j, i := range missing {
			texts[j] = memrow.ValueText(rows[i].Value)
		}
		vs, err := s.embedder.Embed(ctx, texts)
		if err != nil {
			return nil, embedError("embedding the memories to consolidate", err)
		}
		for j, i := range missing {
			cands[i].vector = vs[j]
		}
	}
	return cands, nil
}

func membersOf(c []consolidationCandidate) []MemberView {
	out := make([]MemberView, len(c))
	for i, m := range c {
		out[i] = MemberView{MemoryID: m.row.MemoryID, MemoryKey: m.row.MemoryKey, Agent: m.row.Agent, UserID: m.row.UserID, Version: m.row.Version}
	}
	return out
}

// mergeCluster asks the model for a cluster's summary and commits it with the
// merged rows' tombstones; it answers the summary, or why the cluster failed and the
// key concerned, and the model calls made.
func (s *Service) mergeCluster(ctx context.Context, p auth.Principal, bill llm.Bill, runID string, c []consolidationCandidate,
	taken map[string]bool) (*SummaryView, string, string, int) {
	modelKey, summaryText, ok := s.askSummary(ctx, bill, c)
	if !ok {
		return nil, "model_failed", "", 1
	}
	now := s.now()
	first := c[0].row
	id := memrow.Identity{Org: first.Org, Namespace: first.Namespace, Agent: first.Agent, UserID: first.UserID,
		SessionID: memrow.DefaultIdentity}
	key, head, reason := s.summaryKey(ctx, id, modelKey, c, taken)
	if reason != "" {
		return nil, reason, key, 1
	}
	id.MemoryKey = key
	value, err := json.Marshal(summaryText)
	if err == nil {
		value, err = memrow.Canonical("value", value)
	}
	if err != nil {
		return nil, "model_failed", key, 1
	}
	summary := &memrow.Row{Identity: id, MemoryID: uuid.NewString(), MemoryType: first.MemoryType, Status: memrow.StatusActive,
		Value: value, ContentSHA256: memrow.ContentSHA256(value), Tags: []string{"consolidated"}, Entities: []string{},
		Actor: p.Actor(), SourceClass: SourceDerived, Sensitivity: memrow.SensitivityNormal, CreatedAt: now, UpdatedAt: now}
	var readVersion, readSeq int64
	if head != nil {
		readVersion, readSeq = head.Version, head.Seq
	}
	summary.Version = memrow.NextVersion(now, readVersion)
	inheritLineage(summary, c)
	own := &pending{own: true, op: opConsolidate, event: events.TypeWritten, row: summary, readVersion: readVersion, readSeq: readSeq}
	if err := s.embedRows(ctx, []*pending{own}); err != nil {
		return nil, "embed_failed", key, 1
	}
	rows := []*pending{own}
	for _, m := range c {
		t := copyOf(m.row)
		t.Tombstone, t.Status, t.SupersededBy = true, memrow.StatusSuperseded, summary.MemoryID
		t.Actor = p.Actor()
		rows = append(rows, &pending{own: true, op: opConsolidate, event: events.TypeTombstoned, row: t,
			readVersion: m.row.Version, readSeq: m.row.Seq})
	}
	// The run records the versions the commit stamped (stampRows runs before inTx).
	record := func(ctx context.Context, tx pgx.Tx) error {
		rec := runCluster{SummaryID: summary.MemoryID, SummaryVersion: summary.Version}
		for i, m := range c {
			rec.Merged = append(rec.Merged, runMerged{MemoryID: m.row.MemoryID, ReadVersion: m.row.Version, TombstoneVersion: rows[i+1].row.Version})
		}
		return appendRunCluster(ctx, tx, runID, rec)
	}
	err = s.commit(ctx, &commitPlan{org: id.Org, namespace: id.Namespace, rows: rows, requestID: "consolidation:" + runID,
		policyGeneration: -1, inTx: record})
	switch {
	case errors.Is(err, errHeadMoved):
		return nil, "held_since_read", key, 1
	case errors.Is(err, errErased):
		return nil, "erased", key, 1
	case err != nil:
		s.log.Warn("memory.consolidate: a cluster's commit failed", "namespace", id.Namespace, "err", err)
		return nil, "commit_failed", key, 1
	}
	taken[key] = true
	derived := make([]string, len(c))
	for i, m := range c {
		derived[i] = m.row.MemoryID
	}
	return &SummaryView{MemoryID: summary.MemoryID, MemoryKey: key, Version: summary.Version,
		VersionText: memrow.VersionText(summary.Version), DerivedFrom: derived}, "", "", 1
}

// askSummary asks the model once for the cluster's summary and a key for it; false
// when the call fails or answers no summary.
func (s *Service) askSummary(ctx context.Context, bill llm.Bill, c []consolidationCandidate) (key, summary string, ok bool) {
	var b strings.Builder
	b.WriteString("Memories, newest first:\n")
	for _, m := range c {
		fmt.Fprintf(&b, "- key %q: %s\n", m.row.MemoryKey, cut(memrow.ValueText(m.row.Value), consolidationValueChars))
	}
	var out struct {
		Key     string `json:"key"`
		Summary string `json:"summary"`
	}
	_, err := s.models.CompleteJSON(ctx, llm.Request{Bill: bill, Schema: consolidationSchema, MaxTokens: 1500,
		Messages: []llm.Message{{Role: llm.RoleSystem, Content: consolidationRubric}, {Role: llm.RoleUser, Content: b.String()}}}, &out)
	if err != nil {
		s.log.Warn("memory.consolidate: the model's summary failed", "namespace", bill.Namespace, "err", err)
		return "", "", false
	}
	summary = strings.TrimSpace(out.Summary)
	return strings.TrimSpace(out.Key), summary, summary != ""
}

// inheritLineage gives the summary its sources' lineage: the src: tags first, then the
// union of the sources' tags and entities, within a row's limits (a src: tag of a key
// too long for a tag is left out; derived_from names every source), and their highest
// confidence.
func inheritLineage(summary *memrow.Row, c []consolidationCandidate) {
	for _, m := range c {
		if src := "src:" + m.row.MemoryKey; len(src) <= memrow.MaxTagBytes && len(summary.Tags) < memrow.MaxTags {
			summary.Tags = appendOnce(summary.Tags, src)
		}
		for _, e := range m.row.Entities {
			if len(summary.Entities) < memrow.MaxEntities {
				summary.Entities = appendOnce(summary.Entities, e)
			}
		}
		summary.Confidence = max(summary.Confidence, m.row.Confidence)
	}
	for _, m := range c {
		for _, t := range m.row.Tags {
			if len(summary.Tags) < memrow.MaxTags {
				summary.Tags = appendOnce(summary.Tags, t)
			}
		}
	}
}

// summaryKey picks the summary's key: the model's, unless it is not a valid key, is
// taken by a live row (a merged row's too: the merged rows are retired, not
// overwritten, so an undo finds each as it was) or by another cluster of the run; then
// a key of the cluster's own (the model's key and a hash of the merged ids). When that
// is taken too the cluster fails (key_taken). It answers the head of the key, if any
// (a deleted row the summary is written over).
func (s *Service) summaryKey(ctx context.Context, id memrow.Identity, model string, c []consolidationCandidate, taken map[string]bool) (string, *memrow.Row, string) {
	ids := make([]string, len(c))
	for i, m := range c {
		ids[i] = m.row.MemoryID
	}
	slices.Sort(ids)
	h := sha256.Sum256([]byte(strings.Join(ids, ",")))
	base := model
	if memrow.ValidateKey(base) != nil {
		base = "consolidated"
	}
	suffix := "~" + hex.EncodeToString(h[:4])
	own := base
	if len(own)+len(suffix) > memrow.MaxKeyBytes {
		own = strings.ToValidUTF8(own[:memrow.MaxKeyBytes-len(suffix)], "")
	}
	own += suffix
	now := s.now()
	for _, key := range []string{base, own} {
		if taken[key] {
			continue
		}
		id.MemoryKey = key
		head, err := heads.Read(ctx, s.pool, id)
		if err != nil {
			return key, nil, "key_unread"
		}
		if head == nil || !head.Live(now) {
			return key, head, ""
		}
	}
	return own, nil, "key_taken"
}

// cut is s cut to n runes.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

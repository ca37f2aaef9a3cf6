package indexfeed

import (
	"context"
	"time"

	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/searchindex"
)

// Health is what a process shows of its index on /v1/health: the follower's warm-up
// and what the index holds.
type Health struct {
	Warm bool `json:"warm"`
	// Applied of Target: the records of the topic as it stood at the start, applied so far.
	Target         int64     `json:"target_records"`
	Applied        int64     `json:"applied_records"`
	WarmPercent    float64   `json:"warm_percent"`
	Behind         int64     `json:"records_behind"`
	StartedAt      time.Time `json:"started_at"`
	WarmAt         time.Time `json:"warm_at,omitzero"`
	WarmSeconds    float64   `json:"warm_seconds,omitempty"`
	Namespaces     int       `json:"namespaces"`
	Held           int       `json:"namespaces_held"`
	Entries        int64     `json:"entries"`
	Vectors        int64     `json:"vectors"`
	Bytes          int64     `json:"bytes"`
	BudgetBytes    int64     `json:"budget_bytes"`
	Evicted        int64     `json:"evicted_namespaces"`
	Undecodable    int64     `json:"undecodable_records"`
	Unopenable     int64     `json:"unopenable_records"`
	LastAppliedAgo float64   `json:"last_applied_seconds_ago,omitempty"`
	// The checkpoint the process started from (restored memories, the records it stood
	// for; Target is then the tail), why one found was refused, and the last one written.
	Restored           int64     `json:"restored_entries,omitempty"`
	Covered            int64     `json:"restored_records,omitempty"`
	RestoreRefused     string    `json:"checkpoint_refused,omitempty"`
	Checkpoints        int64     `json:"checkpoints_written,omitempty"`
	CheckpointBytes    int64     `json:"checkpoint_bytes,omitempty"`
	CheckpointAt       time.Time `json:"checkpoint_at,omitzero"`
	CheckpointFailures int64     `json:"checkpoint_failures,omitempty"`
}

// HealthOf reports the follower's progress and the index's holdings.
func HealthOf(f *Follower, x *searchindex.Index) Health {
	p, st := f.Progress(), x.Stats()
	h := Health{Warm: p.Warm, Target: p.Target, Applied: min(p.Applied, p.Target), Behind: p.Behind, StartedAt: p.StartedAt,
		WarmAt: p.WarmAt, Namespaces: st.Namespaces, Held: st.Held, Entries: st.Entries, Vectors: st.Vectors, Bytes: st.Bytes,
		BudgetBytes: f.cfg.MaxBytes, Evicted: p.Evicted, Undecodable: p.Undecodable, Unopenable: p.Unopenable, WarmPercent: 100,
		Restored: p.Restored, Covered: p.Covered, RestoreRefused: p.RestoreRefused, Checkpoints: p.Checkpoints,
		CheckpointBytes: p.CheckpointBytes, CheckpointAt: p.CheckpointAt, CheckpointFailures: p.CheckpointFailures}
	if p.Target > 0 {
		h.WarmPercent = float64(int(1000*float64(h.Applied)/float64(p.Target))) / 10
	}
	if p.Warm {
		h.WarmPercent = 100
		h.WarmSeconds = p.WarmAt.Sub(p.StartedAt).Seconds()
	}
	if !p.LastAppliedAt.IsZero() {
		h.LastAppliedAgo = time.Since(p.LastAppliedAt).Seconds()
	}
	return h
}

// RegisterGauges registers the index's gauges in reg, read at scrape time.
func RegisterGauges(reg *metrics.Registry, f *Follower, x *searchindex.Index) {
	read := func(context.Context) (Health, error) { return HealthOf(f, x), nil }
	warm := func(h Health) int64 {
		if h.Warm {
			return 1
		}
		return 0
	}
	metrics.GaugesOf(reg, read, []metrics.StatGauge[Health]{
		{Name: "loom_index_warm", Help: "1 once the search index applied every record the topic held when the process started.", Of: warm},
		{Name: "loom_index_entries", Help: "Memories (identities) the search index holds.", Of: func(h Health) int64 { return h.Entries }},
		{Name: "loom_index_vectors", Help: "Value vectors the search index holds.", Of: func(h Health) int64 { return h.Vectors }},
		{Name: "loom_index_bytes", Help: "An estimate of the memory the search index's structures hold.", Of: func(h Health) int64 { return h.Bytes }},
		{Name: "loom_index_namespaces", Help: "Namespaces the search index follows.", Of: func(h Health) int64 { return int64(h.Namespaces) }},
		{Name: "loom_index_namespaces_held", Help: "Of them, namespaces served from memory (the others, past LOOM_INDEX_MAX_BYTES, from ClickHouse).",
			Of: func(h Health) int64 { return int64(h.Held) }},
		{Name: "loom_index_applied_records", Help: "Records the search index's follower applied since the process started.",
			Of: func(h Health) int64 { return f.Progress().Applied }},
		{Name: "loom_index_records_behind", Help: "Records on the topic past those the search index applied, as of its last fetch: the index's lag.",
			Of: func(h Health) int64 { return h.Behind }},
		{Name: "loom_index_evicted_namespaces", Help: "Namespaces dropped from memory to keep within LOOM_INDEX_MAX_BYTES.",
			Of: func(h Health) int64 { return h.Evicted }},
		{Name: "loom_index_restored_entries", Help: "Memories the search index loaded from its checkpoint at the start (0: it replayed the topic).",
			Of: func(h Health) int64 { return h.Restored }},
		{Name: "loom_index_checkpoints_written", Help: "Checkpoints of the search index written since the process started (LOOM_INDEX_CHECKPOINT_DIR).",
			Of: func(h Health) int64 { return h.Checkpoints }},
		{Name: "loom_index_checkpoint_bytes", Help: "The size of the search index's last checkpoint.",
			Of: func(h Health) int64 { return h.CheckpointBytes }},
		{Name: "loom_index_checkpoint_failures", Help: "Checkpoints of the search index that could not be written.",
			Of: func(h Health) int64 { return h.CheckpointFailures }},
	})
}

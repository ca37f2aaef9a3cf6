// Package workers is the workers role: the background model work over what the write
// side committed (the conflict resolver, the entity extractor), its queue, and the
// extraction workers that run deferred memory.set_from_messages requests. It writes
// only through the write side's worker API (command/workerapi.go).
package workers

import (
	"context"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/revisions"
)

// The workers role runs the background model work of the write side: the conflict
// resolver (resolver.go) and the entity extractor (entities.go). Each is a consumer
// group of the revisions topic that queues, in loom.worker_items (workqueue.go), the
// written versions it owes something, and commits its offsets once they are queued;
// its passes drain the queue and write through the commit every write takes. The
// queue row is the version's stamp, so a replay of the group (its offsets moved
// back) queues what it had queued and does nothing twice; what the pass cannot do
// now (the model down, the namespace's cap spent, an erasure of its org running)
// stays owed in the queue rather than holding the topic's partition behind it.

// Service is the workers role: its settings, the write side it writes through, and
// what wakes each worker's pass in this process.
type Service struct {
	cmd      *command.Service
	pool     *pgxpool.Pool
	embedder embed.Embedder
	models   *llm.Provider // nil or unconfigured: no worker runs
	log      *slog.Logger
	now      func() time.Time
	// cfg is the workers' settings; pipe what every role shares (the projection the
	// resolver waits for, the shutdown grace); extraction the extraction workers'.
	cfg        config.Workers
	pipe       config.Pipeline
	extraction config.Extraction
	wake       map[string]chan struct{}
	// outage notes when the provider refuses the key or the model, and when it
	// answers again, once each.
	outage *llm.Outage
	// extractions counts the extraction workers' requests by outcome.
	extractions *metrics.CounterVec
	// profiles counts the structured_profile pass's user builds by outcome.
	profiles *metrics.CounterVec
	// profileScan is when the newest profile schema this process's pass has built
	// every user of was set (structured_profile.go); only the pass reads it.
	profileScan time.Time
	// sections counts the profile_consolidation pass's user builds by outcome;
	// sectionScan is when the newest opt-in its pass has built every user of was
	// stored (profile_consolidation.go).
	sections    *metrics.CounterVec
	sectionScan time.Time
	// digestWait is, per session, when this process's session_digest pass asks again
	// after an unusable answer (session_digests.go); only the pass reads it.
	digestWait map[string]time.Time
	// reflectionWait is, per session, when this process's reflection_distill pass asks
	// again after a failed call (reflection_distill.go); only the pass reads it.
	reflectionWait map[string]time.Time
	// stats and passMetrics are each worker's account (passes.go).
	stats       map[string]*passStats
	passMetrics passMetrics
	// ch is ClickHouse, for the passes that read a projection (UseClickHouse).
	ch *ch.Conn
	// recalibrated is told of each namespace the recalibration pass rewrote (OnRecalibrated).
	recalibrated func(org, namespace, embedder string)
	// recalShort keeps the namespaces too small to recalibrate yet (recalibration.go).
	recalShort recalShortfalls
	// gate paces this process's passes together (pacing.go).
	gate *passGate
}

// New returns the workers role over the write side cmd.
func New(cmd *command.Service, cfg config.Workers, pipe config.Pipeline, extraction config.Extraction, pool *pgxpool.Pool,
	embedder embed.Embedder, models *llm.Provider, reg *metrics.Registry, log *slog.Logger) *Service {
	return &Service{cmd: cmd, pool: pool, embedder: embedder, models: models, log: log, now: time.Now,
		cfg: cfg, pipe: pipe, extraction: extraction,
		wake: map[string]chan struct{}{workerResolver: make(chan struct{}, 1), workerEntities: make(chan struct{}, 1),
			workerProfile: make(chan struct{}, 1), workerEmbedding: make(chan struct{}, 1), workerUsageFold: make(chan struct{}, 1),
			workerSessionDigest: make(chan struct{}, 1), workerSensitivity: make(chan struct{}, 1), workerCommunities: make(chan struct{}, 1),
			workerConsolidation: make(chan struct{}, 1), workerRecalibration: make(chan struct{}, 1), workerReflections: make(chan struct{}, 1)},
		stats: map[string]*passStats{workerResolver: {}, workerEntities: {}, workerProfile: {}, workerEmbedding: {},
			workerUsageFold: {}, workerSessionDigest: {}, workerSensitivity: {}, workerCommunities: {}, workerConsolidation: {},
			workerRecalibration: {}, workerReflections: {}},
		digestWait:     map[string]time.Time{},
		reflectionWait: map[string]time.Time{},
		passMetrics:    newPassMetrics(reg),
		outage:         llm.NewOutage(log, "conflict resolver"),
		extractions: reg.Counter("loom_extraction_requests_total",
			"Deferred extraction requests an extraction worker handled, by outcome (done, pending, held, failed, not_claimable, lost, cut, ...).", "outcome"),
		profiles: reg.Counter("loom_structured_profile_builds_total",
			"Users the structured_profile pass brought up to date, by outcome (built, current, retired, skipped, out_of_schema, deferred).", "outcome"),
		sections: newSectionBuilds(reg),
		gate:     newPassGate(cfg.Pacing),
	}
}

// JudgementFloor is the cosine at which a write's peer marks it for the resolver
// (command.WithJudgementFloor); 0 while the resolver is off.
func JudgementFloor(cfg config.Workers) float64 {
	if !cfg.Resolver.Enabled {
		return 0
	}
	return cfg.Resolver.MinSimilarity
}

// workerPause is how long a worker waits after a pass the model, the locks or an
// outage stopped: the next passes would pay for the same answers.
const workerPause = 5 * time.Minute

// soon is when a worker tries again what may clear soon (a store, a lock, an erasure
// of the org): after its pass's interval, a minute at most.
func (s *Service) soon(worker string) time.Duration {
	switch worker {
	case workerEntities:
		return min(s.cfg.Entities.Interval, time.Minute)
	case workerProfile:
		return min(s.cfg.Profiles.Interval, time.Minute)
	case workerEmbedding:
		return min(s.cfg.Embedding.Interval, time.Minute)
	case workerUsageFold:
		return min(s.cfg.UsageFold.Interval, time.Minute)
	case workerSessionDigest:
		return min(s.cfg.SessionDigest.Interval, time.Minute)
	case workerSensitivity:
		return min(s.cfg.SensitivitySweep.Interval, time.Minute)
	case workerCommunities:
		return min(s.cfg.Communities.Interval, time.Minute)
	case workerConsolidation:
		return min(s.cfg.ProfileConsolidation.Interval, time.Minute)
	case workerRecalibration:
		return min(s.cfg.Recalibration.Interval, time.Minute)
	case workerReflections:
		return min(s.cfg.ReflectionDistill.Interval, time.Minute)
	}
	return min(s.cfg.Resolver.Interval, time.Minute)
}

// workLease is how long a pass holds the items it claimed; a pass that dies leaves
// them to another after it.
const workLease = 2 * time.Minute

// Group is the consumer group of a worker (conflict_resolver, entity_extractor).
func Group(worker string) string {
	switch worker {
	case workerResolver:
		return "loom-worker-conflict-resolver"
	case workerEntities:
		return "loom-worker-entity-extractor"
	case workerProfile:
		return "loom-worker-structured-profile"
	case workerEmbedding:
		return "loom-worker-embedding-worker"
	}
	return "loom-worker-" + worker
}

// Names are the names of the workers, in the order the role starts them.
func Names() []string {
	return []string{workerResolver, workerEntities, workerProfile, workerEmbedding, workerUsageFold, workerSessionDigest, workerSensitivity, workerCommunities,
		workerConsolidation, workerRecalibration, workerReflections}
}

// Fed reports whether a worker is a consumer of the topic (its feed queues its work):
// every worker is.
func Fed(worker string) bool {
	return true
}

// Enabled reports whether a worker runs: it is switched on and, for a worker that
// calls a model, a provider is configured (without one the pass would read nothing and
// the rows stay owed).
func (s *Service) Enabled(worker string) bool {
	switch worker {
	case workerEmbedding:
		return s.cfg.Embedding.Enabled
	case workerUsageFold:
		return s.cfg.UsageFold.Enabled
	case workerSensitivity:
		return s.cfg.SensitivitySweep.Enabled
	case workerCommunities:
		return s.cfg.Communities.Enabled
	case workerRecalibration:
		return s.cfg.Recalibration.Enabled
	}
	if s.models == nil || !s.models.Configured() {
		return false
	}
	switch worker {
	case workerResolver:
		return s.cfg.Resolver.Enabled
	case workerEntities:
		return s.cfg.Entities.Enabled
	case workerProfile:
		return s.cfg.Profiles.Enabled
	case workerSessionDigest:
		return s.cfg.SessionDigest.Enabled
	case workerConsolidation:
		return s.cfg.ProfileConsolidation.Enabled
	case workerReflections:
		return s.cfg.ReflectionDistill.Enabled
	}
	return false
}

// ConsumerOpts are the kgo options of a worker's consumer: its group, from the
// topic's start for a group that never committed, offsets committed only once the
// batch is queued, no rebalance while a batch is in hand, and fetches that wait for
// feedFetchBytes or feedFetchWait.
func ConsumerOpts(worker, topic string) []kgo.Opt {
	return []kgo.Opt{
		kgo.ConsumerGroup(Group(worker)),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(feedFetchWait),
		kgo.FetchMinBytes(feedFetchBytes),
	}
}

// A worker's feed fetches records feedFetchBytes at a time, or what feedFetchWait
// brought: its passes are background work, and a fetch answered per record (what a
// fetch waiting for any byte gets at one write at a time) costs each feed a fetch, a
// decode, a queue insert and an offset commit per write, on the cores the writes use.
// A backlog (a replay, a pass newly enabled) fills the bytes at once and is not slowed.
const (
	feedFetchWait  = 250 * time.Millisecond
	feedFetchBytes = 1 << 20
)

// feedRecords is how many records a worker's consumer queues at once at most.
const feedRecords = 2000

// RunFeed runs a worker's consumer until ctx ends: each polled batch's
// revisions that owe the worker something are queued, then the batch's offsets are
// committed, and this process's pass is woken. A batch that cannot be queued is
// retried, its offsets uncommitted, until it is.
func (s *Service) RunFeed(ctx context.Context, worker string, consumer *kgo.Client) error {
	for {
		fetches := consumer.PollRecords(ctx, feedRecords)
		if ctx.Err() != nil {
			consumer.AllowRebalance()
			return nil
		}
		fetches.EachError(func(topic string, part int32, err error) {
			s.log.Warn("worker feed: fetch failed", "worker", worker, "topic", topic, "partition", part, "err", err)
		})
		recs := fetches.Records()
		if len(recs) == 0 {
			consumer.AllowRebalance()
			continue
		}
		due := false
		bo := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithMaxElapsedTime(0), backoff.WithMaxInterval(10*time.Second)), ctx)
		err := backoff.Retry(func() error {
			// Reading a batch (its keys, its opened content) and queueing it is pass work:
			// it takes its turn at the gate, so a group catching up on a long topic (a
			// pass newly enabled, a replay) is paced as a pass is.
			if !s.enterGate(ctx, worker) {
				return ctx.Err()
			}
			start := time.Now()
			items, err := s.pickItems(ctx, worker, recs)
			if err == nil {
				due, err = s.queueWork(ctx, items)
			}
			s.leaveGate(worker, time.Since(start))
			if err != nil && ctx.Err() == nil {
				s.log.Warn("worker feed: queueing a batch failed; retrying", "worker", worker, "records", len(recs), "err", err)
			}
			return err
		}, bo)
		if err == nil {
			if cerr := consumer.CommitRecords(ctx, recs...); cerr != nil && ctx.Err() == nil {
				// Uncommitted offsets mean redelivery, which the queue takes as it is.
				s.log.Warn("worker feed: offset commit failed; the batch will be redelivered", "worker", worker, "err", cerr)
			}
			if due {
				// A batch that queued nothing due leaves the pass asleep: it would
				// claim nothing (or only what its interval would find).
				s.wakeWorker(worker)
			}
		}
		consumer.AllowRebalance()
		if ctx.Err() != nil {
			return nil
		}
	}
}

// pickItems decodes a batch and returns the items it owes the worker, from the
// revisions' opened content.
func (s *Service) pickItems(ctx context.Context, worker string, recs []*kgo.Record) ([]workItem, error) {
	if worker == workerProfile {
		return s.pickProfileItems(ctx, recs)
	}
	if worker == workerConsolidation {
		return s.pickSectionItems(ctx, recs)
	}
	decoded := revisions.Decode(recs, func(r *kgo.Record, err error) {
		s.log.Warn("worker feed: a record is not an envelope; skipped", "worker", worker, "partition", r.Partition, "offset", r.Offset, "err", err)
	})
	if fedByNamespace(worker) {
		return s.pickDue(worker, decoded), nil
	}
	if worker == workerUsageFold {
		return s.pickUsage(decoded), nil
	}
	now := s.now()
	var envs []*events.Envelope
	for _, d := range decoded {
		if d.Kind == revisions.Revision && (worker == workerEmbedding && stubRevision(d.Env) || worker != workerEmbedding && writesValue(d.Env)) {
			envs = append(envs, d.Env)
		}
	}
	if worker == workerSensitivity {
		// The pass reads the head strong; nothing of the content is needed here.
		var items []workItem
		for _, env := range envs {
			if owesSweep(env, now, s.cfg.SensitivitySweep.MaxAge) {
				items = append(items, itemOf(worker, env))
			}
		}
		return items, nil
	}
	if worker == workerResolver {
		owed := envs[:0]
		for _, env := range envs {
			if owedJudgement(env, now, s.cfg.Resolver.MaxOwedAge) {
				owed = append(owed, env)
			}
		}
		envs = owed
	}
	if len(envs) == 0 {
		return nil, nil
	}
	if worker == workerEmbedding {
		return s.pickStubs(ctx, envs)
	}
	// Both read the opened content: the item's user id and digest are sealed (envelope
	// version 2), and the extractor reads whether the writer named entities.
	keys, err := revisions.FetchKeys(ctx, s.pool, envs)
	if err != nil {
		return nil, err
	}
	opened, _, _ := revisions.Open(envs, keys)
	var items []workItem
	for _, o := range opened {
		if worker == workerResolver || owesEntities(o.Env, o.Content, now, s.cfg.Entities.MaxAge) {
			items = append(items, itemOf(worker, o.Env))
		}
	}
	return items, nil
}

// writesValue reports whether a revision is a write of a value, whose mark (and lack
// of entities) belong to it; a copy writer's revision (a pin, a flag, a retirement)
// carries its head's, which the write before it owed already.
func writesValue(env *events.Envelope) bool {
	return (env.Type == events.TypeWritten || env.Type == events.TypeRevised) && !env.Revision.Tombstone
}

// servedRevision reports whether a revision's row is one search serves: a fact (active
// or conflicted) of a searchable type that is not high, and not expired at its write.
func servedRevision(rev *events.Revision, at time.Time) bool {
	status := memrow.Status(rev.Status)
	return (status == memrow.StatusActive || status == memrow.StatusConflicted) &&
		memrow.Sensitivity(rev.Sensitivity) != memrow.SensitivityHigh && !memrow.NonSearchableTypes[rev.MemoryType] &&
		(rev.ExpiresAt == nil || rev.ExpiresAt.After(at))
}

// owedJudgement is the resolver's pick: a value write its admission marked, recent
// enough to be judged.
func owedJudgement(env *events.Envelope, now time.Time, maxAge time.Duration) bool {
	rev := env.Revision
	return rev.JudgementOwed && servedRevision(rev, env.CommittedAt) && env.CommittedAt.After(now.Add(-maxAge))
}

// owesEntities is the extractor's pick: a value write that names no entity and states
// no relation, recent enough.
func owesEntities(env *events.Envelope, c *events.Content, now time.Time, maxAge time.Duration) bool {
	return len(c.Entities) == 0 && len(c.Relations) == 0 && len(c.Value) > 0 &&
		servedRevision(env.Revision, env.CommittedAt) && env.CommittedAt.After(now.Add(-maxAge))
}

func itemOf(worker string, env *events.Envelope) workItem {
	rev := env.Revision
	return workItem{worker: worker, org: env.Org, namespace: env.Namespace, memoryID: rev.MemoryID, version: rev.Version,
		seq: env.Seq, userID: rev.UserID, sha: rev.ContentSHA256, writtenAt: env.CommittedAt}
}

// wakeWorker tells this process's pass of worker that items were queued.
func (s *Service) wakeWorker(worker string) {
	select {
	case s.wake[worker] <- struct{}{}:
	default:
	}
}

// passResult is how a pass ended.
type passResult struct {
	claimed, done int
	full          bool // it claimed a whole batch
	errors        int
	stopped       bool // the model, the locks or an outage stopped it: pause
}

// runPasses runs pass until ctx ends: again at once after a full batch with no
// errors (for up to five minutes in a row), after workerPause when one stopped, else
// when an item is queued here or interval passes; each pass waits its turn at the
// process's gate (pacing.go). Old stamps are swept once an hour.
func (s *Service) runPasses(ctx context.Context, worker string, interval, keep time.Duration, pass func(context.Context) passResult) {
	var streak time.Time
	var swept time.Time
	for ctx.Err() == nil {
		if keep > 0 && time.Since(swept) > time.Hour {
			if err := s.sweepDone(ctx, worker, keep); err != nil && ctx.Err() == nil {
				s.log.Warn("worker: sweeping old stamps failed", "worker", worker, "err", err)
			}
			swept = time.Now()
		}
		if !s.enterGate(ctx, worker) {
			return
		}
		start := time.Now()
		r := pass(ctx)
		s.account(ctx, worker, r)
		s.leaveGate(worker, time.Since(start))
		wait := interval
		switch {
		case r.stopped:
			wait, streak = workerPause, time.Time{}
		case r.full && r.errors == 0 && r.done > 0:
			if streak.IsZero() {
				streak = start
			}
			if time.Since(streak) < 5*time.Minute {
				continue
			}
			streak = time.Time{}
		default:
			streak = time.Time{}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-s.wake[worker]:
			if r.stopped {
				// A pause holds even when more arrives.
				select {
				case <-ctx.Done():
				case <-t.C:
				}
			}
		}
		t.Stop()
	}
}

// Run runs a worker's passes until ctx ends.
func (s *Service) Run(ctx context.Context, worker string) {
	switch worker {
	case workerResolver:
		s.RunResolver(ctx)
	case workerEntities:
		s.RunEntityExtractor(ctx)
	case workerProfile:
		s.RunStructuredProfile(ctx)
	case workerEmbedding:
		s.RunEmbeddingWorker(ctx)
	case workerUsageFold:
		s.RunUsageFold(ctx)
	case workerSessionDigest:
		s.RunSessionDigests(ctx)
	case workerSensitivity:
		s.RunSensitivitySweep(ctx)
	case workerCommunities:
		s.RunEntityCommunities(ctx)
	case workerConsolidation:
		s.RunProfileConsolidation(ctx)
	case workerRecalibration:
		s.RunRecalibration(ctx)
	case workerReflections:
		s.RunReflectionDistill(ctx)
	}
}

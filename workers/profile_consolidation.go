package workers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/profiles"
	"github.com/loomplane/loom/internal/revisions"
)

// The profile_consolidation pass (memory-architecture, "Background passes"; off by
// default, LOOM_PROFILE_CONSOLIDATION_ENABLED, and per namespace opt-in, its
// configuration's profile_consolidation): for each user of a namespace that opts in,
// one profile section of their preferences and decisions, written by one model call
// (a JSON Schema answer) from the user's preference and decision memories and stored
// as a memory row of type profile at key profile_section:<user> (internal/profiles),
// so its history, erasure and read scope are memory's and no search leg serves it.
// profile.render renders it after the structured profile, and context.pack packs it in
// the profile section. It is built as the structured profile is (structured_profile.go):
// its consumer group queues every revision of a preference or a decision in a namespace
// that opts in; a pass first builds every user of a namespace that opted in since the
// last pass, then the users behind a batch of queued revisions, each once, and only
// when the digest of the user's sources (or the pass's schema and prompt) differs from
// the one the section records. A user left with no source has the section deleted.

const (
	workerConsolidation   = "profile_consolidation"
	opConsolidateProfile  = "profile.consolidate"
	opRetireConsolidation = "profile.consolidate_retire"
)

// sectionSchema is the section the model writes: each list a user's statements in
// their own words, one a line.
var sectionDoc = map[string]any{
	"type": "object", "additionalProperties": false, "required": []string{"preferences", "decisions"},
	"properties": map[string]any{
		"preferences": map[string]any{"type": "array", "items": map[string]any{"type": "string"},
			"description": "Each standing preference of the user, one short sentence each, most important first."},
		"decisions": map[string]any{"type": "array", "items": map[string]any{"type": "string"},
			"description": "Each decision still in force, one short sentence each with its reason when stated, newest first."},
	},
}

var sectionSchema = llm.MustSchema("profile_section", "The user's standing preferences and the decisions they made.", sectionDoc)

const sectionRubric = `Write the user's profile section: their standing preferences and the decisions still in force, from the memories stored about them. State each once, briefly, only from what the memories say. Where memories disagree, the newer one (listed first) wins and the older is left out. A decision another decision replaced is left out.`

// sectionHash stands in the stamp for a structured profile's schema hash: a change to
// the section's schema or prompt in a new build rebuilds every section once.
var sectionHash = func() string {
	doc, _ := json.Marshal(map[string]any{"schema": sectionDoc, "rubric": sectionRubric})
	return profiles.HashOf(doc)
}()

var sectionKind = profileKind{worker: workerConsolidation, actor: profiles.SectionActor, build: opConsolidateProfile,
	retire: opRetireConsolidation, trusted: profiles.SectionTrusted,
	builds: func(s *Service) *metrics.CounterVec { return s.sections }, logName: workerConsolidation}

// newSectionBuilds is the pass's count of user builds by outcome, every outcome's
// series there from the start (0), so /metrics shows it wherever the pass runs or not.
func newSectionBuilds(reg *metrics.Registry) *metrics.CounterVec {
	c := reg.Counter("loom_profile_consolidation_builds_total",
		"Users the profile_consolidation pass brought up to date, by outcome (built, current, retired, skipped, out_of_schema, deferred).", "outcome")
	for _, o := range []string{outcomeBuilt, outcomeCurrent, outcomeRetired, outcomeSkipped, "out_of_schema", "deferred"} {
		c.With(o).Add(0)
	}
	return c
}

// RunProfileConsolidation runs the pass until ctx ends.
func (s *Service) RunProfileConsolidation(ctx context.Context) {
	cfg := s.cfg.ProfileConsolidation
	s.runPasses(ctx, workerConsolidation, cfg.Interval, cfg.MaxAge+24*time.Hour, s.consolidationPass)
}

// pickSectionItems is the pass's pick: every revision of a preference or a decision in
// a namespace that opts in (a write, a deletion, a restore, a status change may each
// change a user's sources), of a named user.
func (s *Service) pickSectionItems(ctx context.Context, recs []*kgo.Record) ([]workItem, error) {
	decoded := revisions.Decode(recs, func(r *kgo.Record, err error) {
		s.log.Warn("worker feed: a record is not an envelope; skipped", "worker", workerConsolidation, "partition", r.Partition, "offset", r.Offset, "err", err)
	})
	now := s.now()
	var envs []*events.Envelope
	var orgs, nss []string
	for _, d := range decoded {
		if d.Kind != revisions.Revision || !sectionType(d.Env.Revision.MemoryType) ||
			!d.Env.CommittedAt.After(now.Add(-s.cfg.ProfileConsolidation.MaxAge)) {
			continue
		}
		envs = append(envs, d.Env)
		orgs, nss = append(orgs, d.Env.Org), append(nss, d.Env.Namespace)
	}
	if len(envs) == 0 {
		return nil, nil
	}
	on, err := profiles.ConsolidationOf(ctx, s.pool, orgs, nss)
	if err != nil {
		return nil, err
	}
	kept := envs[:0]
	for _, env := range envs {
		if on[[2]string{env.Org, env.Namespace}] {
			kept = append(kept, env)
		}
	}
	return s.userItems(ctx, workerConsolidation, kept)
}

// userItems are the items of revisions for a pass that keeps a row per user: the
// user id is sealed (envelope version 2), so each is read from the opened content; a
// revision of no named user owes nothing.
func (s *Service) userItems(ctx context.Context, worker string, envs []*events.Envelope) ([]workItem, error) {
	if len(envs) == 0 {
		return nil, nil
	}
	keys, err := revisions.FetchKeys(ctx, s.pool, envs)
	if err != nil {
		return nil, err
	}
	opened, _, _ := revisions.Open(envs, keys)
	items := make([]workItem, 0, len(opened))
	for _, o := range opened {
		if o.Env.Revision.UserID == "" || command.Anonymous(o.Env.Revision.UserID) {
			continue
		}
		items = append(items, itemOf(worker, o.Env))
	}
	return items, nil
}

func sectionType(t string) bool {
	for _, st := range profiles.SectionTypes {
		if t == st {
			return true
		}
	}
	return false
}

// consolidationPass builds every user of a namespace that opted in since the last
// pass, then the users behind one batch of queued revisions, each once.
func (s *Service) consolidationPass(ctx context.Context) passResult {
	cfg := s.cfg.ProfileConsolidation
	return s.userPass(ctx, sectionKind, cfg.Batch, cfg.MaxAge, s.scanOptIns, s.buildSection)
}

// scanOptIns builds every user of each namespace whose configuration, opting in, was
// stored after the last one this process scanned: the users whose preferences and
// decisions were written before it queued nothing.
func (s *Service) scanOptIns(ctx context.Context) passResult {
	changed, err := profiles.OptedInSince(ctx, s.pool, s.sectionScan, 100)
	if err != nil {
		s.log.Warn("profile_consolidation: reading the namespaces that opted in failed", "err", err)
		return passResult{errors: 1}
	}
	return s.scanUsers(ctx, sectionKind, changed, &s.sectionScan, s.buildSection)
}

// buildSection brings one user's profile section up to date; a namespace that no
// longer opts in builds nothing.
func (s *Service) buildSection(ctx context.Context, org, ns, userID string) (string, any, error) {
	on, err := profiles.ConsolidationOn(ctx, s.pool, org, ns)
	if err != nil || !on {
		return outcomeSkipped, nil, err
	}
	facts, err := profiles.SectionFacts(ctx, s.pool, org, ns, userID, s.now())
	if err != nil {
		return "", nil, err
	}
	stamp := profiles.Stamp{SchemaHash: sectionHash, Digest: profiles.Digest(facts), Sources: len(facts)}
	return s.rebuild(ctx, sectionKind, profiles.SectionIdentity(org, ns, userID), facts, stamp,
		func(ctx context.Context) (json.RawMessage, int, error) {
			return s.askSection(ctx, org, ns, userID, facts)
		})
}

// askSection asks the model for the section, one call, again while its answers are
// outside the schema (up to LOOM_PROFILE_CONSOLIDATION_ATTEMPTS).
func (s *Service) askSection(ctx context.Context, org, ns, userID string, facts []*memrow.Row) (json.RawMessage, int, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "User %q. Memories, newest first:\n", userID)
	for _, f := range facts {
		fmt.Fprintf(&b, "- (%s) %s: %s\n", f.MemoryType, f.MemoryKey, cut(memrow.ValueText(f.Value), profileValueChars))
	}
	req := llm.Request{Bill: llm.Bill{Org: org, Namespace: ns, Purpose: llm.PurposeProfileConsolidation}, Schema: sectionSchema, MaxTokens: 2000,
		Messages: []llm.Message{{Role: llm.RoleSystem, Content: sectionRubric}, {Role: llm.RoleUser, Content: b.String()}}}
	return s.askHeld(ctx, req, sectionSchema, s.cfg.ProfileConsolidation.Attempts)
}

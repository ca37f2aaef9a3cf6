package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/profiles"
	"github.com/loomplane/loom/internal/revisions"
)

// The structured_profile pass (memory-architecture, "Background passes"): for each
// user of a namespace with a profile schema (profile_schema.set, loom.profile_schemas),
// one profile held to the schema, built by one model call from the user's active facts
// and stored as a memory row of type profile at key profile:<user> (so its history,
// erasure and read scope are memory's, and no search leg serves it). Its consumer
// group queues every revision of a namespace with a schema, in loom.worker_items; a
// pass builds each user behind its items once, and only when the digest of the user's
// facts (or the schema) differs from the one the profile records: a replay of the
// group, a restatement of the profile's own write, or a read changes nothing. A model
// answer outside the schema is refused (the provider checks it, and the pass checks it
// again) and asked again, up to LOOM_STRUCTURED_PROFILE_ATTEMPTS; it is never stored.

const (
	workerProfile   = "structured_profile"
	opBuildProfile  = "profile.build"
	opRetireProfile = "profile.retire"
)

// Outcomes of a structured_profile item.
const (
	outcomeBuilt   = "built"   // a new version of the user's profile was written
	outcomeCurrent = "current" // the profile already holds the facts' digest under the schema
	outcomeRetired = "retired" // the user has no fact left: the profile was deleted
)

// profileValueChars is how much of one fact the prompt shows.
const profileValueChars = 1000

// RunStructuredProfile runs the pass until ctx ends.
func (s *Service) RunStructuredProfile(ctx context.Context) {
	cfg := s.cfg.Profiles
	s.runPasses(ctx, workerProfile, cfg.Interval, cfg.MaxAge+24*time.Hour, s.profilePass)
}

// pickProfileItems is the pass's pick: every revision of a namespace with a profile
// schema that is not a profile's own (a write, a deletion, a restore, a status change
// may each change a user's facts).
func (s *Service) pickProfileItems(ctx context.Context, recs []*kgo.Record) ([]workItem, error) {
	decoded := revisions.Decode(recs, func(r *kgo.Record, err error) {
		s.log.Warn("worker feed: a record is not an envelope; skipped", "worker", workerProfile, "partition", r.Partition, "offset", r.Offset, "err", err)
	})
	now := s.now()
	var envs []*events.Envelope
	var orgs, nss []string
	for _, d := range decoded {
		if d.Kind != revisions.Revision || d.Env.Revision.MemoryType == profiles.MemoryType ||
			!d.Env.CommittedAt.After(now.Add(-s.cfg.Profiles.MaxAge)) {
			continue
		}
		envs = append(envs, d.Env)
		orgs, nss = append(orgs, d.Env.Org), append(nss, d.Env.Namespace)
	}
	if len(envs) == 0 {
		return nil, nil
	}
	with, err := profiles.WithSchema(ctx, s.pool, orgs, nss)
	if err != nil {
		return nil, err
	}
	kept := envs[:0]
	for _, env := range envs {
		if with[[2]string{env.Org, env.Namespace}] {
			kept = append(kept, env)
		}
	}
	return s.userItems(ctx, workerProfile, kept)
}

// profilePass builds every user of a namespace whose schema was set since the last
// pass (scanSchemas), then the users behind one batch of queued revisions, each once.
func (s *Service) profilePass(ctx context.Context) passResult {
	cfg := s.cfg.Profiles
	return s.userPass(ctx, structuredKind, cfg.Batch, cfg.MaxAge, s.scanSchemas, s.buildProfile)
}

// profileKind is one of the two profile rows a pass keeps per user: the structured
// profile, or the profile section (profile_consolidation.go).
type profileKind struct {
	worker, actor string
	build, retire string // the ops of a build and of a retirement
	trusted       func(*memrow.Row, time.Time) bool
	builds        func(s *Service) *metrics.CounterVec // the pass's builds, by outcome
	logName       string
}

var structuredKind = profileKind{worker: workerProfile, actor: profiles.WorkerActor, build: opBuildProfile, retire: opRetireProfile,
	trusted: profiles.Trusted, builds: func(s *Service) *metrics.CounterVec { return s.profiles }, logName: workerProfile}

// buildUser brings one user's row of a profile kind up to date.
type buildUser func(ctx context.Context, org, ns, userID string) (string, any, error)

// userPass runs scan (the users of namespaces that newly owe every user a build),
// then builds the users behind one batch of the kind's queued revisions, each once.
func (s *Service) userPass(ctx context.Context, k profileKind, batch int, maxAge time.Duration,
	scan func(context.Context) passResult, build buildUser) passResult {
	scanned := scan(ctx)
	if scanned.stopped {
		return scanned
	}
	items, res, ok := s.claimPass(ctx, k.worker, batch, maxAge, false)
	res.done, res.errors = res.done+scanned.done, res.errors+scanned.errors
	if !ok {
		return res
	}
	type user struct{ org, ns, id string }
	byUser := map[user][]workItem{}
	var order []user
	for _, it := range items {
		u := user{it.org, it.namespace, it.userID}
		if byUser[u] == nil {
			order = append(order, u)
		}
		byUser[u] = append(byUser[u], it)
	}
	for i, u := range order {
		its := byUser[u]
		if res.stopped || ctx.Err() != nil {
			for _, rest := range order[i:] {
				for _, it := range byUser[rest] {
					s.giveBack(it, 0, false)
				}
			}
			break
		}
		outcome, detail, err := build(ctx, u.org, u.ns, u.id)
		k.builds(s).With(outcomeLabel(outcome, err)).Inc()
		switch {
		case errors.Is(err, errStopped):
			res.stopped, res.errors = true, res.errors+1
			for _, it := range its {
				s.giveBack(it, 0, false)
			}
		case err != nil:
			res.errors++
			if ctx.Err() == nil {
				s.log.Warn(k.logName+": a user's row stays owed", "org", u.org, "namespace", u.ns, "err", err)
			}
			for _, it := range its {
				s.giveBack(it, s.soon(k.worker), errors.Is(err, errOutOfSchema))
			}
		default:
			for _, it := range its {
				if s.stamp(ctx, it, outcome, detail) == judgeDone {
					res.done++
				}
			}
		}
	}
	return res
}

// scanSchemas builds every user of each namespace whose schema was set after the last
// one this process scanned: a new or changed schema reaches the users whose facts were
// written before it, which queued nothing. A user already current costs a read and no
// model call, so a new process scanning every schema again builds nothing twice. A
// namespace that fails is scanned again on the next pass.
func (s *Service) scanSchemas(ctx context.Context) passResult {
	changed, err := profiles.SchemasSince(ctx, s.pool, s.profileScan, 100)
	if err != nil {
		s.log.Warn("structured_profile: reading the changed schemas failed", "err", err)
		return passResult{errors: 1}
	}
	return s.scanUsers(ctx, structuredKind, changed, &s.profileScan, s.buildProfile)
}

// scanUsers builds every user of each changed namespace, in order, and moves cursor
// past each namespace it finished; it stops at the first failure (that namespace is
// scanned again on the next pass).
func (s *Service) scanUsers(ctx context.Context, k profileKind, changed []profiles.Changed, cursor *time.Time, build buildUser) passResult {
	var res passResult
	for _, c := range changed {
		if erasing, err := command.ErasureRunning(ctx, s.pool, c.Org); err != nil || erasing {
			return res // the org's rows wait for its erasure
		}
		users, err := heads.UsersOf(ctx, s.pool, c.Org, c.Namespace, 100000)
		if err != nil {
			res.errors++
			return res
		}
		for _, u := range users {
			if ctx.Err() != nil {
				return res
			}
			outcome, _, err := build(ctx, c.Org, c.Namespace, u)
			k.builds(s).With(outcomeLabel(outcome, err)).Inc()
			switch {
			case errors.Is(err, errStopped):
				res.stopped, res.errors = true, res.errors+1
				return res
			case err != nil:
				s.log.Warn(k.logName+": a user's row stays owed", "org", c.Org, "namespace", c.Namespace, "err", err)
				res.errors++
				return res
			case outcome == outcomeBuilt || outcome == outcomeRetired:
				res.done++
			}
		}
		*cursor = c.UpdatedAt
	}
	return res
}

func outcomeLabel(outcome string, err error) string {
	switch {
	case errors.Is(err, errOutOfSchema):
		return "out_of_schema"
	case err != nil:
		return "deferred"
	}
	return outcome
}

var (
	// errStopped: the provider refused the key or the model; the pass pauses.
	errStopped = errors.New("the model provider refused the key or the model")
	// errOutOfSchema: every answer the build asked for was outside the schema.
	errOutOfSchema = errors.New("the model's answers were outside the profile schema")
)

// buildProfile brings one user's profile up to date: it reads the schema, the user's
// facts and the profile, and writes a new version only when the facts' digest or the
// schema differs from the profile's stamp.
func (s *Service) buildProfile(ctx context.Context, org, ns, userID string) (string, any, error) {
	schema, err := profiles.ReadSchema(ctx, s.pool, org, ns)
	if err != nil || schema == nil {
		return outcomeSkipped, nil, err
	}
	facts, err := profiles.Facts(ctx, s.pool, org, ns, userID, s.now())
	if err != nil {
		return "", nil, err
	}
	stamp := profiles.Stamp{SchemaHash: schema.Hash, Digest: profiles.Digest(facts), Sources: len(facts)}
	return s.rebuild(ctx, structuredKind, profiles.Identity(org, ns, userID), facts, stamp,
		func(ctx context.Context) (json.RawMessage, int, error) {
			return s.askProfile(ctx, org, ns, userID, schema, facts)
		})
}

// rebuild writes a new version of a user's row of kind k at id when its stamp differs
// from stamp (ask gives its value, and the model calls it made), deletes it when the
// user has no source left, and leaves it alone otherwise.
func (s *Service) rebuild(ctx context.Context, k profileKind, id memrow.Identity, facts []*memrow.Row, stamp profiles.Stamp,
	ask func(context.Context) (json.RawMessage, int, error)) (string, any, error) {
	head, err := heads.Read(ctx, s.pool, id)
	if err != nil {
		return "", nil, fmt.Errorf("read the %s row: %w", k.worker, err)
	}
	trusted := k.trusted(head, s.now())
	if trusted && profiles.StampOf(head) == stamp {
		return outcomeCurrent, nil, nil
	}
	if len(facts) == 0 {
		if !trusted {
			return outcomeSkipped, nil, nil
		}
		return outcomeRetired, nil, s.commitProfile(ctx, k, id, head, nil, stamp)
	}
	value, calls, err := ask(ctx)
	if err != nil {
		return "", nil, err
	}
	if err := s.commitProfile(ctx, k, id, head, value, stamp); err != nil {
		return "", nil, err
	}
	return outcomeBuilt, map[string]int{"sources": len(facts), "model_calls": calls}, nil
}

const profileRubric = `Build the user's profile from the facts stored about them. Fill each field of the schema only from what the facts state; use null (or an empty list) where they say nothing. Where facts disagree, the newer one (listed first) wins.`

// askProfile asks the model for the profile, up to the pass's attempts while its
// answers are outside the schema; it returns the canonical value and the calls made.
func (s *Service) askProfile(ctx context.Context, org, ns, userID string, schema *profiles.Schema, facts []*memrow.Row) (json.RawMessage, int, error) {
	sch, err := llm.NewSchema("structured_profile", "The user's profile, held to the namespace's profile schema.", schema.Doc)
	if err != nil {
		return nil, 0, fmt.Errorf("the namespace's profile schema: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "User %q. Facts, newest first:\n", userID)
	for _, f := range facts {
		fmt.Fprintf(&b, "- %s: %s\n", f.MemoryKey, cut(memrow.ValueText(f.Value), profileValueChars))
	}
	bill := llm.Bill{Org: org, Namespace: ns, Purpose: llm.PurposeStructuredProfile}
	req := llm.Request{Bill: bill, Schema: sch, MaxTokens: 2000,
		Messages: []llm.Message{{Role: llm.RoleSystem, Content: profileRubric}, {Role: llm.RoleUser, Content: b.String()}}}
	return s.askHeld(ctx, req, sch, s.cfg.Profiles.Attempts)
}

// askHeld asks the model req up to attempts times while its answers are outside sch;
// it returns the first answer held to it, as canonical JSON, and the calls made.
func (s *Service) askHeld(ctx context.Context, req llm.Request, sch *llm.Schema, attempts int) (json.RawMessage, int, error) {
	calls := 0
	for calls < attempts {
		calls++
		var ans llm.Answer
		o := s.models.Step(ctx, req.Bill, s.outage, func(ctx context.Context) error {
			var err error
			ans, err = s.models.Complete(ctx, req)
			return err
		})
		switch o.Class {
		case 0:
			if o.Err != nil {
				return nil, calls, o.Err
			}
		case llm.ClassStopped:
			return nil, calls, errStopped
		case llm.ClassMalformed:
			continue // refused: outside the schema, cut, or no answer; ask again
		default:
			return nil, calls, o.Err
		}
		// The provider held the answer to the schema; it is checked again here, so
		// nothing outside it is ever stored whatever the provider does.
		if sch.Validate(ans.Content) != nil {
			continue
		}
		value, err := memrow.Canonical("value", []byte(ans.Content))
		if err != nil {
			continue
		}
		return value, calls, nil
	}
	return nil, calls, errOutOfSchema
}

// commitProfile writes the new version of a user's row of kind k over the head read
// (value nil: a tombstone of it), as the pass's actor, through the one commit.
func (s *Service) commitProfile(ctx context.Context, k profileKind, id memrow.Identity, head *memrow.Row, value json.RawMessage, stamp profiles.Stamp) error {
	now := s.now()
	var row *memrow.Row
	var readVersion, readSeq int64
	event := events.TypeWritten
	op := k.build
	if head != nil {
		readVersion, readSeq = head.Version, head.Seq
	}
	switch {
	case value == nil:
		row = command.CopyOf(head)
		row.Tombstone = true
		event, op = events.TypeTombstoned, k.retire
	default:
		row = &memrow.Row{Identity: id, MemoryID: uuid.NewString(), MemoryType: profiles.MemoryType, Status: memrow.StatusActive,
			Entities: []string{}, Confidence: 1, SourceClass: command.SourceDerived, Sensitivity: memrow.SensitivityNormal, CreatedAt: now}
		if head != nil && head.Live(now) {
			row.MemoryID, row.CreatedAt, event = head.MemoryID, head.CreatedAt, events.TypeRevised
		}
		row.Value, row.ContentSHA256 = value, memrow.ContentSHA256(value)
	}
	row.Tags = stamp.Tags()
	row.Actor = k.actor
	row.Version = memrow.NextVersion(now, readVersion)
	row.UpdatedAt = now
	return s.cmd.CommitWorkerPlan(ctx, command.WorkerPlan{Org: row.Org, Namespace: row.Namespace,
		RequestID: fmt.Sprintf("%s:%s/%s", k.worker, row.Namespace, row.UserID),
		Rows:      []command.WorkerRow{{Op: op, Event: event, Row: row, ReadVersion: readVersion, ReadSeq: readSeq}},
		InTx:      refuseUnderErasure(row.Org)})
}

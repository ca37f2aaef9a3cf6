package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/snapshot"
)

// namespace.restore writes a snapshot's memories into a namespace, each a revision
// through the one commit, so the topic, every projection and every downstream consumer
// sees the restore. The payload is read twice: once to check all of it (a snapshot cut
// short or edited writes nothing), then to write it a batch at a time.

// Opener opens the snapshot payload afresh: a restore reads it twice.
type Opener func() (io.ReadCloser, error)

// RestoreAnswer is what namespace.restore answers.
type RestoreAnswer struct {
	SnapshotID string `json:"snapshot_id"`
	// Source is the namespace the snapshot was taken of.
	Source    string `json:"source"`
	Namespace string `json:"namespace"`
	// NamespaceCreated: the namespace had no policy; it now has the snapshot's.
	NamespaceCreated bool `json:"namespace_created"`
	// Replayed: this snapshot was restored into this namespace before; the answer is
	// that restore's, and nothing was written.
	Replayed bool          `json:"replayed"`
	Counts   RestoreCounts `json:"counts"`
	Batches  int           `json:"batches"`
}

// RestoreCounts counts the snapshot's memories by what the restore did with each.
type RestoreCounts struct {
	Rows     int64 `json:"rows"`
	Restored int64 `json:"restored"`
	// Unchanged: the namespace already held the memory as the snapshot does.
	Unchanged int64 `json:"unchanged"`
	// ErasedSkipped: an erasure removed the memory from the snapshot's namespace or
	// this one since (its deletion evidence is kept).
	ErasedSkipped int64 `json:"erased_skipped"`
	// LockedSkipped: the namespace holds the key locked under other content.
	LockedSkipped int64 `json:"locked_skipped"`
	// BlacklistedSkipped: the value matches a blacklist pattern of the namespace.
	BlacklistedSkipped int64 `json:"blacklisted_skipped"`
	// The conversation's record (restore_turns.go). Turns: kept turns written;
	// TurnsUnchanged: the namespace held them already (by turn id); TurnsErasedSkipped:
	// an erasure removed their user since; Digests: session digests written.
	Turns              int64 `json:"turns"`
	TurnsUnchanged     int64 `json:"turns_unchanged"`
	TurnsErasedSkipped int64 `json:"turns_erased_skipped"`
	Digests            int64 `json:"digests"`
	// Learnings: candidates of the learnings queue filed anew (restore_learnings.go).
	Learnings int64 `json:"learnings"`
}

func (a *RestoreAnswer) committed() bool {
	return a.Counts.Restored > 0 || a.Counts.Turns > 0 || a.Counts.Digests > 0 || a.Counts.Learnings > 0
}

func (a *RestoreAnswer) outcome() string {
	switch {
	case a.Replayed:
		return "replayed"
	case a.committed():
		return "ok"
	}
	return "nothing_written"
}

// restoreCall is a restore of a snapshot into the route's namespace.
type restoreCall struct {
	requestID string
	namespace string
	open      Opener
}

// Restore is namespace.restore of the snapshot open reads into namespace: an admin
// token of the snapshot's org that reaches every user (a restore writes every user's
// rows). A memory keeps its id, its versions' provenance and verified_by; it is written
// at a new version as the restorer's revision.
func (s *Service) Restore(ctx context.Context, p auth.Principal, namespace string, open Opener) (*RestoreAnswer, error) {
	return s.restore(ctx, p, restoreCall{namespace: namespace, open: open})
}

func (s *Service) restore(ctx context.Context, p auth.Principal, r restoreCall) (*RestoreAnswer, error) {
	if err := p.Namespace(r.namespace); err != nil {
		return nil, err
	}
	if err := p.RequireAdmin("a namespace restore"); err != nil {
		return nil, err
	}
	if err := p.RequireEveryUser("a namespace restore"); err != nil {
		return nil, err
	}
	h, rows, err := checkSnapshot(r.open)
	if err != nil {
		return nil, err
	}
	if h.Org != p.Org {
		return nil, httperr.New(http.StatusForbidden, httperr.CodePermissionDenied, "the snapshot holds another org's memories")
	}
	snapID, _ := uuid.Parse(h.SnapshotID)
	ans := &RestoreAnswer{SnapshotID: h.SnapshotID, Source: h.Namespace, Namespace: r.namespace}
	if done, err := s.restoredBefore(ctx, p.Org, r.namespace, snapID, ans); err != nil || done {
		return ans, err
	}
	if ans.NamespaceCreated, err = s.createRestored(ctx, p, r.namespace, h); err != nil {
		return nil, err
	}
	pol, err := s.loadPolicy(ctx, s.pool, p.Org, r.namespace)
	if err != nil {
		return nil, httperr.Store("reading the namespace policy", err)
	}
	ans.Counts.Rows = rows
	audit, err := s.startOp(ctx, p, "namespace.restore", r.namespace, r.requestID,
		map[string]any{"snapshot_id": h.SnapshotID, "source": h.Namespace, "namespace_created": ans.NamespaceCreated})
	if err != nil {
		return nil, httperr.Store("auditing the restore", err)
	}
	err = s.writeRestore(ctx, p, r, h, pol, ans)
	audit.finish(ctx, ans.Counts, ans.Batches, err)
	if err != nil {
		return nil, err
	}
	counts, _ := json.Marshal(ans.Counts)
	if err := s.recordRestore(ctx, p.Org, r.namespace, snapID, h.Namespace, counts, p.Actor()); err != nil {
		return nil, httperr.Store("recording the restore", err)
	}
	return ans, nil
}

// checkSnapshot reads the whole payload once and checks it: its framing (the end line
// counts and digests what came before), the header's allowlisted pairs, every memory as
// a restore would write it, every turn and digest of the conversation's record, and every
// learning.
func checkSnapshot(open Opener) (snapshot.Header, int64, error) {
	var h snapshot.Header
	var n, records int64
	err := eachSnapshotLine(open, func(hd snapshot.Header, line snapshot.Line) error {
		h = hd
		switch {
		case line == snapshot.Line{}:
			return checkRestoredAllowlist(hd.Allowlist)
		case line.Memory != nil:
			n++
			if err := checkRestoredRow(line.Memory); err != nil {
				return fmt.Errorf("%w: memory %d: %w", snapshot.ErrMalformed, n, err)
			}
		case line.Turn != nil, line.Digest != nil:
			records++
			if err := checkRestoredRecord(line); err != nil {
				return fmt.Errorf("%w: turn or digest %d: %w", snapshot.ErrMalformed, records, err)
			}
		case line.Learning != nil:
			records++
			if err := checkRestoredLearning(line.Learning); err != nil {
				return fmt.Errorf("%w: learning %d: %w", snapshot.ErrMalformed, records, err)
			}
		}
		return nil
	})
	return h, n, err
}

// eachSnapshotLine reads a payload and calls fn with its header (an empty line) and
// then each line.
func eachSnapshotLine(open Opener, fn func(snapshot.Header, snapshot.Line) error) error {
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	rd, err := snapshot.NewReader(rc)
	if err != nil {
		return snapshotError(err)
	}
	if _, err := uuid.Parse(rd.Header.SnapshotID); err != nil {
		return snapshotError(fmt.Errorf("%w: snapshot_id is not a UUID", snapshot.ErrMalformed))
	}
	if err := fn(rd.Header, snapshot.Line{}); err != nil {
		return snapshotError(err)
	}
	for {
		line, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err == nil {
			err = fn(rd.Header, line)
		}
		if err != nil {
			return snapshotError(err)
		}
	}
}

// snapshotError answers a payload that is not a whole snapshot as 422.
func snapshotError(err error) error {
	var fe *memrow.FieldError
	if errors.Is(err, snapshot.ErrMalformed) && !errors.As(err, &fe) {
		return httperr.Validation("body", err.Error())
	}
	return err
}

// checkRestoredRow holds one snapshot memory to what a write of it must be: a valid
// identity and id, and content whose hash is its content_sha256.
func checkRestoredRow(r *memrow.Row) error {
	if err := (memrow.Identity{Org: "o", Namespace: "n", Agent: r.Agent, UserID: r.UserID, SessionID: r.SessionID, MemoryKey: r.MemoryKey}).Validate(); err != nil {
		return err
	}
	if _, err := uuid.Parse(r.MemoryID); err != nil {
		return errors.New("memory_id is not a UUID")
	}
	switch r.Status {
	case memrow.StatusActive, memrow.StatusProposed, memrow.StatusConflicted, memrow.StatusDuplicate, memrow.StatusSuperseded, memrow.StatusRejected:
	default:
		return fmt.Errorf("unknown status %q", r.Status)
	}
	if r.Tombstone {
		return errors.New("a snapshot holds live memories only")
	}
	if r.Redacted {
		return nil
	}
	value, err := memrow.Canonical("value", r.Value)
	if err != nil {
		return err
	}
	if memrow.ContentSHA256(value) != r.ContentSHA256 {
		return errors.New("the value does not hash to its content_sha256")
	}
	if err := memrow.ValidateTags(r.Tags); err != nil {
		return err
	}
	return memrow.ValidateConfidence(r.Confidence)
}

// createRestored gives a namespace with no policy of its own the snapshot's: its
// configuration and blacklist, as a policy change.
func (s *Service) createRestored(ctx context.Context, p auth.Principal, ns string, h snapshot.Header) (bool, error) {
	cfg := DefaultConfig()
	if len(h.Config) > 0 {
		if err := json.Unmarshal(h.Config, &cfg); err != nil {
			return false, httperr.Validation("body", "the snapshot's namespace config is not a config: "+err.Error())
		}
	}
	if err := cfg.Validate(); err != nil {
		return false, err
	}
	for _, pat := range h.Blacklist {
		if err := checkPattern(pat); err != nil {
			return false, err
		}
	}
	raw, _ := json.Marshal(cfg)
	created := false
	err := s.changePolicy(ctx, p.Org, func(tx pgx.Tx) error {
		made, err := createNamespace(ctx, tx, p.Org, ns, raw, p.Actor())
		if err != nil || !made {
			return err
		}
		created = true
		for _, pat := range h.Blacklist {
			if err := addPattern(ctx, tx, p, ns, pat); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return false, httperr.Store("creating the namespace", err)
	}
	return created, nil
}

// writeRestore reads the payload again and commits its memories a batch at a time,
// then its conversation's record (restore_turns.go).
func (s *Service) writeRestore(ctx context.Context, p auth.Principal, r restoreCall, h snapshot.Header, pol *policy, ans *RestoreAnswer) error {
	batch := make([]*memrow.Row, 0, s.cfg.RestoreBatchRows)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := s.restoreBatch(ctx, p, r, h.Namespace, pol, batch, ans)
		batch = batch[:0]
		return err
	}
	conv := s.newConversationRestore(p, r.namespace, h.Namespace, ans)
	err := eachSnapshotLine(r.open, func(_ snapshot.Header, line snapshot.Line) error {
		switch {
		case line.Memory != nil:
			batch = append(batch, line.Memory)
			if len(batch) == cap(batch) {
				return flush()
			}
		case line.Turn != nil, line.Digest != nil:
			// A payload writes its memories first: they are in before their turns link them.
			if err := flush(); err != nil {
				return err
			}
			return conv.add(ctx, line)
		case line.Learning != nil:
			if err := flush(); err != nil {
				return err
			}
			if err := conv.flush(ctx); err != nil {
				return err
			}
			return conv.addLearning(ctx, line.Learning)
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err == nil {
		err = conv.flush(ctx)
	}
	if err == nil {
		err = s.restoreAllowedPairs(ctx, p, r.namespace, h.Allowlist)
	}
	return err
}

// restoreBatch commits one batch over the heads it reads of the namespace, reading
// them again when one moved under it.
func (s *Service) restoreBatch(ctx context.Context, p auth.Principal, r restoreCall, source string, pol *policy, rows []*memrow.Row, ans *RestoreAnswer) error {
	ids := make([]string, len(rows))
	for i, row := range rows {
		ids[i] = row.MemoryID
	}
	evidence := []string{source, r.namespace}
	erased, err := s.erasedIn(ctx, s.pool, p.Org, evidence, ids)
	if err != nil {
		return httperr.Store("reading the deletion evidence", err)
	}
	var c RestoreCounts
	var want []*memrow.Row
	for _, row := range rows {
		switch {
		case erased[row.MemoryID]:
			c.ErasedSkipped++
		case !row.Redacted && blacklistedRow(pol, row):
			c.BlacklistedSkipped++
		default:
			t := copyOf(row)
			t.Org, t.Namespace, t.Actor = p.Org, r.namespace, p.Actor()
			want = append(want, t)
		}
	}
	for round := 0; ; round++ {
		if round > 8 {
			return contended(errHeadMoved)
		}
		plan, counts, err := s.restorePlan(ctx, p, r, want)
		if err != nil {
			return err
		}
		plan.evidence = evidence
		if len(plan.rows) > 0 {
			if _, err := s.embedRowsOrStub(ctx, plan.rows); err != nil {
				return err
			}
			err = s.commit(ctx, plan)
		}
		switch {
		case errors.Is(err, errHeadMoved):
			continue
		case errors.Is(err, errErased):
			return erasedWhileRestoring(ans.Batches)
		case err != nil:
			return commitError(err)
		}
		c.Unchanged, c.LockedSkipped, c.Restored = counts.Unchanged, counts.LockedSkipped, int64(len(plan.rows))
		break
	}
	ans.Counts.Restored += c.Restored
	ans.Counts.Unchanged += c.Unchanged
	ans.Counts.ErasedSkipped += c.ErasedSkipped
	ans.Counts.LockedSkipped += c.LockedSkipped
	ans.Counts.BlacklistedSkipped += c.BlacklistedSkipped
	if c.Restored > 0 {
		ans.Batches++
	}
	return nil
}

// restorePlan reads the namespace's heads of the rows and builds the commit of those
// it changes.
func (s *Service) restorePlan(ctx context.Context, p auth.Principal, r restoreCall, want []*memrow.Row) (*commitPlan, RestoreCounts, error) {
	var c RestoreCounts
	plan := &commitPlan{org: p.Org, namespace: r.namespace, requestID: r.requestID, policyGeneration: -1}
	if len(want) == 0 {
		return plan, c, nil
	}
	keys := make([]memrow.Identity, len(want))
	for i, row := range want {
		keys[i] = row.Identity
	}
	current, err := heads.Many(ctx, s.pool, p.Org, r.namespace, keys)
	if err != nil {
		return nil, c, httperr.Store("reading the namespace's heads", err)
	}
	for _, row := range want {
		head := current[heads.IdentityKey(row.Identity)]
		pd := &pending{own: true, op: "namespace.restore", event: events.TypeWritten, row: copyOf(row)}
		if head != nil {
			pd.readVersion, pd.readSeq = head.Version, head.Seq
			switch {
			case !head.Tombstone && sameState(head, row):
				c.Unchanged++
				continue
			case !head.Tombstone && head.Locked:
				c.LockedSkipped++
				continue
			case head.Tombstone:
				pd.event = events.TypeRestored
			default:
				pd.event = events.TypeRevised
			}
		}
		plan.rows = append(plan.rows, pd)
	}
	return plan, c, nil
}

// blacklistedRow reports whether a row's value matches one of the policy's patterns.
func blacklistedRow(pol *policy, row *memrow.Row) bool {
	_, hit := pol.blacklisted(memrow.ValueText(row.Value))
	return hit
}

// erasedWhileRestoring answers a restore an erasure overtook: what it wrote stands, and
// a retry leaves out what the erasure removed.
func erasedWhileRestoring(batches int) error {
	return httperr.New(http.StatusConflict, CodePreconditionFailed,
		"an erasure removed memories or turns of this snapshot while it was restored; retry: the restore leaves them out").
		With("batches_written", batches)
}

package command

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/route"
)

// A copy writer changes a key's state, not its value: it builds a new version from
// the head it read and commits only over that exact version. A head that moved in
// between answers 503 ADMISSION_CONTENDED, retryable, and writes nothing.

// copyOp is one copy writer: how it changes the head's copy, and what it answers.
type copyOp struct {
	op    string
	event events.Type
	// deadOK: the op acts on a deleted head too (restore).
	deadOK bool
	change func(ctx context.Context, s *Service, c *copyWrite) error
}

// copyWrite is one copy writer's state.
type copyWrite struct {
	p         auth.Principal
	head      *memrow.Row
	row       *memrow.Row
	now       time.Time
	vector    []float32 // a restore's freshly embedded vectors
	keyVec    []float32
	chunkVecs [][]float32
	extra     map[string]any
	noWrite   bool // the op answers without writing (a restore of a redacted key)
	// inTx records what must commit with the row (an Undo's record); see commitPlan.
	inTx func(ctx context.Context, tx pgx.Tx) error
}

// keyMethods are the custom methods of POST /v1/namespaces/{ns}/memories/{key}:{method}.
var keyMethods = map[string]copyOp{
	"pin":     {op: "memory.pin", event: events.TypeStatusChanged, change: func(_ context.Context, _ *Service, c *copyWrite) error { c.row.Pinned = true; return nil }},
	"unpin":   {op: "memory.unpin", event: events.TypeStatusChanged, change: func(_ context.Context, _ *Service, c *copyWrite) error { c.row.Pinned = false; return nil }},
	"lock":    {op: "memory.lock", event: events.TypeStatusChanged, change: func(_ context.Context, _ *Service, c *copyWrite) error { c.row.Locked = true; return nil }},
	"unlock":  {op: "memory.unlock", event: events.TypeStatusChanged, change: func(_ context.Context, _ *Service, c *copyWrite) error { c.row.Locked = false; return nil }},
	"reject":  {op: "memory.reject", event: events.TypeStatusChanged, change: rejectChange},
	"verify":  {op: "memory.verify", event: events.TypeStatusChanged, change: verifyChange},
	"restore": {op: "memory.restore", event: events.TypeRestored, deadOK: true, change: restoreOrUndoChange},
	// unsupersede is the Undo of a retirement (unsupersede.go).
	"unsupersede": {op: "memory.unsupersede", event: events.TypeRestored, change: unsupersedeChange},
}

// keyHandlers are the custom methods of the same route that are not copy writers.
var keyHandlers = map[string]keyHandler{
	"redact": (*Service).handleRedact,
	"decide": (*Service).handleDecide,
	"touch":  (*Service).handleTouch,
	// Shared scope (promote.go, demote.go).
	"promote":       (*Service).handlePromote,
	"cross_promote": (*Service).handleCrossPromote,
	"demote":        (*Service).handleDemote,
	// memory.copy and memory.move (move.go).
	"copy": (*Service).handleCopyMemory,
	"move": (*Service).handleMoveMemory,
	// memory.assign_category (assign_category.go).
	"assign_category": (*Service).handleAssignCategory,
}

// deleteOp is memory.delete: a tombstone over the head, which keeps the head's text
// (a restore brings it back) and retires its search document.
var deleteOp = copyOp{op: "memory.delete", event: events.TypeTombstoned, change: func(_ context.Context, _ *Service, c *copyWrite) error {
	if c.head.Locked {
		return locked("delete")
	}
	c.row.Tombstone = true
	if c.head.MemoryType == decisionMemoryType {
		// A deleted decision retires its record, in the delete's transaction.
		id, actor := c.head.Identity, c.p.Actor()
		c.inTx = func(ctx context.Context, tx pgx.Tx) error { return retireDecisionRecord(ctx, tx, id, actor) }
	}
	return nil
}}

func rejectChange(_ context.Context, _ *Service, c *copyWrite) error {
	if c.head.Locked {
		return locked("reject")
	}
	if c.head.Pinned {
		return pinnedConflict("a pinned memory cannot be rejected; unpin it first")
	}
	c.row.Status = memrow.StatusRejected
	return nil
}

func verifyChange(_ context.Context, _ *Service, c *copyWrite) error {
	at := c.now.UTC()
	c.row.VerifiedBy, c.row.VerifiedAt = c.p.Actor(), &at
	return nil
}

// restoreChange undoes a delete or a supersession. A supersession's row returns to the
// status of the key's newest earlier version that was not superseded; the answer says
// which. The restored row gets its search document again.
func restoreChange(ctx context.Context, s *Service, c *copyWrite) error {
	switch {
	case c.head.Redacted:
		// A key deleted and then redacted stays deleted: its text is gone.
		c.noWrite = true
		return nil
	case c.head.Tombstone:
		c.row.Tombstone = false
		c.extra["restored"] = "delete"
		if c.row.Expired(c.now) {
			// The sweep deleted it for its expiry: the restore brings it back for good.
			c.row.ExpiresAt, c.row.OnExpire, c.row.ValidTo = nil, "", nil
		}
	case c.head.Status == memrow.StatusSuperseded || c.head.Status == memrow.StatusRejected:
		status, err := s.statusBefore(ctx, c.head)
		if err != nil {
			return httperr.Store("reading the key's earlier statuses", err)
		}
		c.extra["restored"] = c.head.Status
		c.row.Status, c.row.SupersededBy = status, ""
	default:
		return httperr.New(http.StatusConflict, CodePreconditionFailed, "the memory is neither deleted, superseded nor rejected: nothing to restore")
	}
	if err := s.requalify(ctx, c); err != nil {
		return err
	}
	c.extra["restored_status"] = c.row.Status
	// The deleted row's search documents were retired: the restore builds them again.
	p := &pending{row: c.row}
	if _, err := s.embedRowsOrStub(ctx, []*pending{p}); err != nil {
		return err
	}
	c.vector, c.keyVec, c.chunkVecs = p.vector, p.keyVector, p.chunkVectors
	return nil
}

// requalify checks the status a restore brings back against the peers it names: a row
// comes back conflicted only while a peer is still conflicted and lists it, and
// duplicate only while the original it repeats is still served (postgres-authority.md,
// memory.restore); otherwise it comes back active, without the stale links.
func (s *Service) requalify(ctx context.Context, c *copyWrite) error {
	var ids []string
	switch {
	case c.row.Status == memrow.StatusConflicted:
		ids = c.row.ConflictWith
	case c.row.Status == memrow.StatusDuplicate && c.row.DuplicateOf != "":
		ids = []string{c.row.DuplicateOf}
	}
	var peers []*memrow.Row
	if len(ids) > 0 {
		var err error
		if peers, err = heads.InNamespaceWithIDs(ctx, s.pool, c.row.Org, c.row.Namespace, ids); err != nil {
			return httperr.Store("reading the peers the restored row names", err)
		}
	}
	requalified(c.row, peers, c.now)
	return nil
}

// requalified applies the restore's peer rule to row, given the heads of the peers it
// names (the rule requalify reads them for).
func requalified(row *memrow.Row, peers []*memrow.Row, now time.Time) {
	switch row.Status {
	case memrow.StatusConflicted:
		var still []string
		for _, id := range row.ConflictWith {
			for _, p := range peers {
				if p.MemoryID == id && p.Live(now) && p.Status == memrow.StatusConflicted && slices.Contains(p.ConflictWith, row.MemoryID) {
					still = append(still, id)
					break
				}
			}
		}
		row.ConflictWith = still
		if len(still) == 0 {
			row.Status = memrow.StatusActive
		}
	case memrow.StatusDuplicate:
		served := false
		for _, p := range peers {
			served = served || (p.MemoryID == row.DuplicateOf && p.Served(now))
		}
		if !served {
			row.Status, row.DuplicateOf = memrow.StatusActive, ""
		}
	}
}

// copyAnswer is a copy writer's answer: the row's new state, or why nothing was written.
type copyAnswer map[string]any

func (a copyAnswer) committed() bool { return a["written"] == true }

func (a copyAnswer) outcome() string {
	if a.committed() {
		return "ok"
	}
	if a["version_changed"] == true {
		return "version_changed"
	}
	return "unchanged"
}

// unchanged reports whether a copy states nothing its head does not: same state, same
// content, whoever asked.
func unchanged(head, row *memrow.Row) bool { return sameState(head, row) }

// sameState reports whether two rows of a key state the same: the same memory, content
// and state, whatever revision carries them (version, seq, time of the commit, who
// wrote it, the embedder of its search document).
func sameState(a, b *memrow.Row) bool {
	x, y := *a, *b
	for _, r := range []*memrow.Row{&x, &y} {
		r.Identity, r.Version, r.Seq, r.UpdatedAt, r.Actor, r.EmbeddingModel, r.EmbeddingDim = memrow.Identity{}, 0, 0, time.Time{}, "", "", 0
		// A copy may carry an empty list as none.
		if len(r.Tags) == 0 {
			r.Tags = nil
		}
		if len(r.Entities) == 0 {
			r.Entities = nil
		}
	}
	jx, _ := json.Marshal(x)
	jy, _ := json.Marshal(y)
	return string(jx) == string(jy)
}

// splitMethod splits a raw path segment "key:method" at its last colon; a colon that
// belongs to the key is sent percent-encoded.
func splitMethod(raw string) (key, method string, err error) {
	i := strings.LastIndexByte(raw, ':')
	if i < 0 {
		return "", "", httperr.NotFound("no such route: POST a custom method, e.g. .../memories/{key}:pin")
	}
	key, err = route.DecodeKey(raw[:i])
	return key, raw[i+1:], err
}

// copyBody is the optional body of a copy writer: the identity of the key.
type copyBody struct {
	Agent     string `json:"agent"`
	UserID    string `json:"user_id"`
	SessionID string `json:"session_id"`
}

func (b copyBody) names() route.Names {
	return route.Names{Agent: b.Agent, UserID: b.UserID, SessionID: b.SessionID}
}

// copyCall is a copy writer's call: the key the route and the body name, and for
// memory.delete_version the version the caller read (-1: any).
type copyCall struct {
	origin
	namespace, key string
	names          route.Names
	version        int64
	op             copyOp
}

// keyIdentity is the key a write addressed by route and body acts on. A token bound to
// one user acts on that user's keys; another user's head is not found.
func keyIdentity(p auth.Principal, ns, key string, names route.Names) (memrow.Identity, error) {
	id, _ := route.Identity(p, ns, key, names)
	return id, id.Validate()
}

// runCopy reads the head, lets op change a copy of it, and commits the copy over that
// exact version. A version >= 0 names the version the caller read: when the head has
// moved on, nothing is written and the answer says version_changed.
func (s *Service) runCopy(ctx context.Context, p auth.Principal, r copyCall) (copyAnswer, error) {
	id, err := keyIdentity(p, r.namespace, r.key, r.names)
	if err != nil {
		return nil, err
	}
	// A shared row changes only by promote, demote and redact: a pin, a lock or a
	// delete of it would leave loom.shared saying otherwise, and a lock would block
	// its demotion.
	if err := route.RefuseShared(id.UserID); err != nil {
		return nil, err
	}
	op := r.op
	head, err := heads.Read(ctx, s.pool, id)
	if err != nil {
		return nil, httperr.Store("reading the head", err)
	}
	now := s.now()
	if head == nil || !p.Sees(head.UserID, head.SessionID) || (!op.deadOK && !head.Live(now)) {
		return nil, httperr.NotFound("memory not found")
	}
	if r.version >= 0 && head.Version != r.version {
		return copyAnswer{"memory_id": head.MemoryID, "memory_key": r.key, "written": false, "deleted": false, "version_changed": true,
			"version": head.Version, "version_text": memrow.VersionText(head.Version)}, nil
	}
	cw := &copyWrite{p: p, head: head, row: copyOf(head), now: now, extra: map[string]any{}}
	cw.row.Actor = p.Actor()
	if err := op.change(ctx, s, cw); err != nil {
		return nil, err
	}
	if cw.noWrite || unchanged(head, cw.row) {
		// Pinning a pinned row changes nothing: nothing is written.
		ans := copyAnswer{"memory_id": head.MemoryID, "memory_key": head.MemoryKey, "version": head.Version,
			"version_text": memrow.VersionText(head.Version), "seq": head.Seq, "written": false, "status": head.Status,
			"pinned": head.Pinned, "locked": head.Locked, "tombstone": head.Tombstone}
		if head.Redacted {
			ans["redacted"] = true
		}
		return ans, nil
	}
	plan := &commitPlan{org: p.Org, namespace: r.namespace, requestID: r.requestID, policyGeneration: -1, idem: r.hold, inTx: cw.inTx, liveNamespace: true,
		rows: []*pending{{own: true, op: op.op, event: op.event, row: cw.row, readVersion: head.Version, readSeq: head.Seq,
			vector: cw.vector, keyVector: cw.keyVec, chunkVectors: cw.chunkVecs}}}
	s.faults.beforeCommit()
	if err := s.commit(ctx, plan); err != nil {
		if errors.Is(err, errHeadMoved) {
			return nil, contended(err)
		}
		return nil, commitError(err)
	}
	if err := s.faults.afterCommit(); err != nil {
		return nil, err
	}
	row := cw.row
	ans := copyAnswer{"written": true, "memory_id": row.MemoryID, "memory_key": row.MemoryKey, "agent": row.Agent, "user_id": row.UserID,
		"session_id": row.SessionID, "version": row.Version, "version_text": memrow.VersionText(row.Version), "seq": row.Seq,
		"event": string(op.event), "status": row.Status, "pinned": row.Pinned, "locked": row.Locked, "tombstone": row.Tombstone}
	if op.op == "memory.delete" || op.op == "memory.delete_version" {
		ans["deleted"] = true
	}
	for k, v := range cw.extra {
		ans[k] = v
	}
	return ans, nil
}

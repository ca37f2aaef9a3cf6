package projector

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auditchain"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/tableset"
)

// auditRow is one row of audit_log: its chained fields (auditchain.Row, hashes
// included) and the fields an erasure scrubs, which the chain leaves out.
type auditRow struct {
	auditchain.Row
	memoryKey, userID, contentSHA256, subjectSalt string
}

// chainAudits builds the batch's audit rows (its revisions, the keyless ones scrubbed,
// the writes' own rows their records note, its redactions, its erasures and the
// erasure sagas' own rows: erasures holds the memory.erased and loom.audited records) and links each namespace's in seq order after the
// last row the table holds below them. The hashes depend only on the records and
// their order, so a redelivery or a replay writes the same ones. With link false the
// rows keep empty hashes (Projector.SetAuditChainOff). heads are the last hashes the
// projector kept of namespaces whose chain the batch continues (chainHeads): those
// are not read again.
func chainAudits(ctx context.Context, conn *ch.Conn, set tableset.Set, rows []opened, keyless, redactions, erasures []*events.Envelope,
	link bool, heads map[nsKey]string) (out []*auditRow, err error) {
	for _, o := range rows {
		out = append(out, revisionAudit(o.env, o.content))
	}
	for _, env := range keyless {
		out = append(out, revisionAudit(env, &events.Content{}))
	}
	noted := append([]*events.Envelope(nil), keyless...)
	for _, o := range rows {
		noted = append(noted, o.env) // a note's row needs no content
	}
	for _, env := range noted {
		if out, err = appendNote(out, env); err != nil {
			return nil, err
		}
	}
	for _, env := range redactions {
		out = append(out, revisionAudit(env, &events.Content{}))
	}
	for _, env := range erasures {
		if env.Type == events.TypeErased {
			out = append(out, erasureAudit(env))
		}
		if out, err = appendNote(out, env); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 || !link {
		return out, nil
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Org != b.Org {
			return a.Org < b.Org
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Seq != b.Seq {
			return a.Seq < b.Seq
		}
		return a.Op < b.Op // as a walk reads them
	})
	prevs, err := lastAuditHashes(ctx, conn, set, out, heads)
	if err != nil {
		return nil, err
	}
	for i := 0; i < len(out); {
		j := i
		k := nsKey{out[i].Org, out[i].Namespace}
		chain := []*auditchain.Row{}
		for ; j < len(out) && out[j].Org == k.org && out[j].Namespace == k.namespace; j++ {
			chain = append(chain, &out[j].Row)
		}
		auditchain.Link(prevs[k], chain)
		i = j
	}
	return out, nil
}

// chainFormatOf is the audit chain format of the rows a record leaves: from envelope
// version 3 on, whose revisions commit to their agent and session
// (auditchain.WriterSubjectCommitment), the rows hash neither.
func chainFormatOf(env *events.Envelope) uint8 {
	if env.Version >= 3 {
		return auditchain.FormatWriter
	}
	return auditchain.FormatV1
}

// chainFormat is a row's chain_format as stored: FormatV1 for a row that names none.
func chainFormat(r auditchain.Row) uint8 {
	if r.Format == 0 {
		return auditchain.FormatV1
	}
	return r.Format
}

// revisionAudit is a revision's audit row; content is empty for a redaction's record
// and a keyless revision, whose row keeps no key, content hash or user id, nor, from
// envelope version 3 on, agent or session id (the record carries them sealed only).
func revisionAudit(env *events.Envelope, c *events.Content) *auditRow {
	v := env.Revision
	r := &auditRow{Row: auditchain.Row{Org: env.Org, Namespace: env.Namespace, Seq: uint64(env.Seq), Op: v.Op,
		EventType: string(env.Type), OccurredAt: seconds(env.CommittedAt), Actor: v.Actor, Agent: v.Agent, SessionID: v.SessionID,
		MemoryID: mustUUID(v.MemoryID).String(), Version: uint64(v.Version), SourceClass: v.SourceClass, Status: v.Status,
		RequestID: v.RequestID, SubjectCommitment: v.SubjectCommitment, Format: chainFormatOf(env)}, memoryKey: c.MemoryKey}
	if c.MemoryKey != "" {
		// Opened: revisions.Open lifted the sealed user id and content digest in (and,
		// from version 3 on, the agent and session id).
		r.userID, r.contentSHA256, r.subjectSalt = v.UserID, v.ContentSHA256, c.SubjectSalt
	} else if r.Format == auditchain.FormatWriter {
		r.Agent, r.SessionID = "", ""
	}
	if v.Verdict != "" {
		// The seed's audit row names the write's verdict; detail is hashed into the
		// chain, so a verdict edited after the fact breaks it.
		detail, _ := json.Marshal(revisionVerdict{Verdict: v.Verdict})
		r.Detail = string(detail)
	}
	return r
}

// revisionVerdict is a write's own revision's audit detail.
type revisionVerdict struct {
	Verdict string `json:"verdict"`
}

// noteOpSuffix names a bulk write's batch row apart from its revisions' rows, which
// share its op and may share its seq (the table's key is org, namespace, seq, op).
const noteOpSuffix = ".batch"

// appendNote adds the audit row of the write a record's note describes
// (events.AuditNote), at the record's seq: hash-only, its account in detail.
func appendNote(out []*auditRow, env *events.Envelope) ([]*auditRow, error) {
	n := env.Audit
	if n == nil {
		return out, nil
	}
	detail, err := json.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("encode the audit note of %s: %w", env.ID, err)
	}
	op := n.Op
	if n.Kind == events.AuditBatch {
		op += noteOpSuffix
	}
	status := "committed"
	if len(n.Pairs) == 1 {
		status = n.Pairs[0].Action
	}
	// An erasure saga's row names its saga as the erasure.request row does, and the
	// saga's status after it; its record carries no revision. From envelope version 3
	// on the row names no agent or session: its revisions' rows do, under their
	// commitments, and a record whose key is gone could not name them again on a replay.
	format := chainFormatOf(env)
	var agent, session, request string
	if v := env.Revision; v != nil {
		request = v.RequestID
		if format == auditchain.FormatV1 {
			agent, session = v.Agent, v.SessionID
		}
	}
	if x := n.Erasure; x != nil {
		status, request = x.Status, x.ID
	}
	return append(out, &auditRow{Row: auditchain.Row{Org: env.Org, Namespace: env.Namespace, Seq: uint64(env.Seq), Op: op,
		EventType: "audit." + n.Kind, OccurredAt: seconds(env.CommittedAt), Actor: n.Actor, Agent: agent, SessionID: session,
		MemoryID: mustUUID("").String(), Status: status, RequestID: request, Detail: string(detail), Format: format}}), nil
}

// erasureAudit is the audit row a memory.erased record leaves: the erasure request,
// and whether it purged the scope's audit rows or scrubbed them. It names no user.
func erasureAudit(env *events.Envelope) *auditRow {
	status := auditchain.StatusScrubbed
	if env.Erasure.Purge {
		status = auditchain.StatusPurged
	}
	return &auditRow{Row: auditchain.Row{Org: env.Org, Namespace: env.Namespace, Seq: uint64(env.Seq), Op: auditchain.OpErasure,
		EventType: auditchain.EventErased, OccurredAt: seconds(env.CommittedAt), Actor: "-", Agent: "", SessionID: "",
		MemoryID: mustUUID("").String(), Status: status, RequestID: env.Erasure.ID, Format: chainFormatOf(env)}}
}

// auditWindow is how far below a namespace's first seq in a batch the chain's last
// hash is looked for first. A namespace's seqs run on without gaps, bar the ones an
// erasure withdrew, so its last row is nearly always just below: reading only the
// window keeps a batch's read to a few rows however long the chain is (a replay of a
// namespace of a million rows would otherwise scan all that lie below each batch).
const auditWindow = 4096

// lastAuditHashes reads, for each namespace of rows (sorted) but those heads holds, the
// hash of the last audit row (in seq, op order) the table holds below the namespace's
// first row here: within the window below it in one statement, and, for a namespace
// with no row there, below it at all in a second. Either answer is the same: a row in
// the window outranks every row under it.
func lastAuditHashes(ctx context.Context, conn *ch.Conn, set tableset.Set, rows []*auditRow, heads map[nsKey]string) (map[nsKey]string, error) {
	firsts := map[nsKey]uint64{}
	out := map[nsKey]string{}
	var order []nsKey
	for _, r := range rows {
		k := nsKey{r.Org, r.Namespace}
		if _, seen := firsts[k]; seen {
			continue
		}
		if h, kept := heads[k]; kept {
			firsts[k], out[k] = r.Seq, h
			continue
		}
		firsts[k] = r.Seq
		order = append(order, k)
	}
	if err := readLastAuditHashes(ctx, conn, set, order, firsts, auditWindow, out); err != nil {
		return nil, err
	}
	var rest []nsKey
	for _, k := range order {
		if _, ok := out[k]; !ok && firsts[k] > auditWindow {
			rest = append(rest, k)
		}
	}
	if err := readLastAuditHashes(ctx, conn, set, rest, firsts, 0, out); err != nil {
		return nil, err
	}
	return out, nil
}

// readLastAuditHashes reads into out the last audit hash below firsts[k] of each
// namespace in keys, within window seqs of it (0: no bound), in one statement.
func readLastAuditHashes(ctx context.Context, conn *ch.Conn, set tableset.Set, keys []nsKey, firsts map[nsKey]uint64, window uint64,
	out map[nsKey]string) error {
	if len(keys) == 0 {
		return nil
	}
	var preds []string
	var args []any
	for _, k := range keys {
		first := firsts[k]
		if window > 0 && first > window {
			preds = append(preds, "(org = ? AND namespace = ? AND seq < ? AND seq >= ?)")
			args = append(args, k.org, k.namespace, first, first-window)
			continue
		}
		preds = append(preds, "(org = ? AND namespace = ? AND seq < ?)")
		args = append(args, k.org, k.namespace, first)
	}
	q := "SELECT org, namespace, argMax(row_hash, (seq, op)) FROM " + set.Qualified("audit_log") + " WHERE " + strings.Join(preds, " OR ") + " GROUP BY org, namespace"
	err := conn.Each(conn.Ctx(ctx), q, args, func(scan func(...any) error) error {
		var k nsKey
		var h string
		if err := scan(&k.org, &k.namespace, &h); err != nil {
			return err
		}
		out[k] = h
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the audit chains' last hashes: %w", err)
	}
	return nil
}

// inBatch keeps the envelopes of the namespaces b still holds.
func inBatch(b batch, envs []*events.Envelope) []*events.Envelope {
	return filter(envs, func(e *events.Envelope) bool {
		_, ok := b.seqs[nsKey{e.Org, e.Namespace}]
		return ok
	})
}

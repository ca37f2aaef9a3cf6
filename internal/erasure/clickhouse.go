package erasure

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-faster/city"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/tableset"
)

// Fence is one namespace's part of an erasure: the rows of the scope (the namespace,
// or one user's rows in it) below Seq, the generation of the erasure's memory.erased
// record. A row at or above it was written after the erasure and stays, so applying a
// fence again, in any batch or replay, never takes a later write.
type Fence struct {
	Org, Namespace string
	UserID         string // "" for the whole namespace
	Seq            int64
	Purge          bool // the audit trail goes too, rather than being scrubbed
	// ErasureID and UserRef are what a version 2 record names the user by: the
	// erasure request and the user's keyed digest. Until a follower resolves UserID
	// from the request (Unresolved), such a fence takes nothing.
	ErasureID, UserRef string
}

// Unresolved reports whether the fence names its user only by reference.
func (f Fence) Unresolved() bool { return f.UserID == "" && f.UserRef != "" }

// FenceOf reads the fence a memory.erased record carries; false when it carries no
// erasure (a record older than the field).
func FenceOf(env *events.Envelope) (Fence, bool) {
	x := env.Erasure
	if env.Type != events.TypeErased || x == nil {
		return Fence{}, false
	}
	return Fence{Org: env.Org, Namespace: env.Namespace, UserID: x.UserID, Seq: env.Seq, Purge: x.Purge,
		ErasureID: x.ID, UserRef: x.UserRef}, true
}

// where is the fence's ClickHouse predicate; every projection table has these columns.
// The user is bound as cityHash64 of the id, computed here: a mutation's command is
// kept in the table's directory (mutation_N.txt) and in system.mutations after it is
// done, so binding the id itself would leave the erased user's id on disk.
func (f Fence) where() (string, []any) {
	if f.UserID == "" {
		return "(org = ? AND namespace = ? AND seq < ?)", []any{f.Org, f.Namespace, uint64(f.Seq)}
	}
	return "(org = ? AND namespace = ? AND cityHash64(user_id) = ? AND seq < ?)",
		[]any{f.Org, f.Namespace, city.CH64([]byte(f.UserID)), uint64(f.Seq)}
}

// chCounted are the ClickHouse tables an erasure clears, without the database.
func chCounted() []string {
	var out []string
	for _, t := range Tables() {
		if t.Store == ClickHouse && t.Class == Counted {
			out = append(out, strings.TrimPrefix(t.Name, ch.Database+"."))
		}
	}
	return out
}

// eraseMutation is what an erasure does to one table of a set for fences of the same
// purge flag: delete the scope's rows, except the audit trail outside a purge, which
// keeps its rows and loses their keys, content hashes and user ids.
func eraseMutation(set tableset.Set, table string, fences []Fence, purge bool) ch.Mutation {
	var preds []string
	var args []any
	for _, f := range fences {
		w, a := f.where()
		preds, args = append(preds, w), append(args, a...)
	}
	m := ch.Mutation{Table: set.Name(table), Where: "(" + strings.Join(preds, " OR ") + ")", Args: args}
	if table == "audit_log" && !purge {
		// The content hash goes with the key: an unkeyed SHA-256 of a short value lets
		// a dictionary of guesses confirm what was erased. The user id goes too: the
		// trail keeps who acted (the actor, a token) and what happened, not whom it was
		// about. The salt of the row's subject commitment goes with them
		// (internal/auditchain): kept, it would let the same dictionary test guesses
		// against the commitment. On a row of the chain's writer format (chain_format
		// 2, from envelope version 3 on) the agent and the session id go too: its
		// commitment covers them, where a row of format 1 hashes them in the clear and
		// keeps them, or its chain would no longer verify.
		m.Set, m.Where = auditScrub, m.Where+" AND "+auditHolds
	}
	return m
}

// auditScrub is what an erasure empties of an audit row it keeps (eraseMutation), as a
// redaction does of its versions' (scrubs), and auditHolds the rows that still hold any
// of it.
const (
	auditScrub = "memory_key = '', content_sha256 = '', user_id = '', subject_salt = '', " +
		"agent = if(chain_format >= 2, '', agent), session_id = if(chain_format >= 2, '', session_id)"
	auditHolds = "(memory_key != '' OR content_sha256 != '' OR user_id != '' OR subject_salt != '' OR " +
		"(chain_format >= 2 AND (agent != '' OR session_id != '')))"
)

// Erase applies fences to every ClickHouse table that can hold content, in every set
// of the projection tables that exists (the serving one, a rebuild's, one kept after a
// switch): one mutation per table and purge flag, each waited to completion. A user's
// part of the shared graph tables goes first, found through the link rows that go
// after it.
func Erase(ctx context.Context, conn *ch.Conn, fences []Fence) error {
	fences = resolved(fences)
	if len(fences) == 0 {
		return nil
	}
	sets, err := tableset.Existing(ctx, conn)
	if err != nil {
		return err
	}
	for _, set := range sets {
		if err := eraseSet(ctx, conn, set, fences); err != nil {
			return fmt.Errorf("erase from the %s tables: %w", set.Set, err)
		}
	}
	return nil
}

func eraseSet(ctx context.Context, conn *ch.Conn, set tableset.Present, fences []Fence) error {
	byPurge := map[bool][]Fence{}
	for _, f := range fences {
		byPurge[f.Purge] = append(byPurge[f.Purge], f)
		if f.UserID != "" {
			if err := eraseSharedGraph(ctx, conn, set, userOwner(f)); err != nil {
				return err
			}
		}
	}
	for purge, fs := range byPurge {
		for _, table := range chCounted() {
			if !set.Has(table) {
				continue
			}
			scope := fs
			if userless(table) {
				if scope = namespaceFences(fs); len(scope) == 0 {
					continue
				}
			}
			if _, err := conn.Mutate(ctx, eraseMutation(set.Set, table, scope, purge)); err != nil {
				return fmt.Errorf("erase from %s: %w", set.Set.Name(table), err)
			}
		}
	}
	return nil
}

// resolved leaves out the fences that name their user only by reference: without the
// user id such a fence would read as the whole namespace's.
func resolved(fs []Fence) []Fence {
	out := make([]Fence, 0, len(fs))
	for _, f := range fs {
		if !f.Unresolved() {
			out = append(out, f)
		}
	}
	return out
}

// namespaceFences are the fences of whole namespaces among fs.
func namespaceFences(fs []Fence) []Fence {
	var out []Fence
	for _, f := range fs {
		if f.UserID == "" {
			out = append(out, f)
		}
	}
	return out
}

// Count is the census of one fence in ClickHouse: per table (by Key), the rows of the
// scope that still hold content, in every set of the projection tables together. A
// user's part of the shared graph tables is counted through its link rows, which go
// only after it.
func Count(ctx context.Context, conn *ch.Conn, f Fence) (map[string]int64, error) {
	sets, err := tableset.Existing(ctx, conn)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, table := range chCounted() {
		key := Table{Store: ClickHouse, Name: ch.Database + "." + table}.Key()
		out[key] = 0
		if userless(table) && f.UserID != "" {
			continue
		}
		for _, set := range sets {
			if !set.Has(table) {
				continue
			}
			m := eraseMutation(set.Set, table, []Fence{f}, f.Purge)
			n, err := countWhere(ctx, conn, set.Set.Qualified(table), m.Where, m.Args)
			if err != nil {
				return nil, fmt.Errorf("count the erasure's residue in %s: %w", set.Set.Name(table), err)
			}
			out[key] += n
		}
	}
	return out, nil
}

// countWhere counts the rows of a table that match a bound predicate.
func countWhere(ctx context.Context, conn *ch.Conn, table, where string, args []any) (int64, error) {
	var n uint64
	if err := conn.QueryRow(conn.Ctx(ctx), fmt.Sprintf("SELECT count() FROM %s WHERE %s", table, where), args...).Scan(&n); err != nil {
		return 0, err
	}
	return int64(n), nil
}

// Redaction is what a memory.redacted record asks of ClickHouse: scrub the text of
// the memory's versions and take what they wrote to the graph (eraseRedactedGraph),
// or, for an erasure's withdrawal of a promoted copy (Withdrawn), drop every row of
// the memory below the record (Seq), its audit rows scrubbed as an erasure scrubs its
// scope's (deleted with Purge).
type Redaction struct {
	Org, Namespace, MemoryID string
	Versions                 []int64
	Seq                      int64
	Withdrawn, Purge         bool
}

// RedactionOf reads the redaction a memory.redacted record carries.
func RedactionOf(env *events.Envelope) (Redaction, bool) {
	if env.Type != events.TypeRedacted || env.Redaction == nil || env.Revision == nil {
		return Redaction{}, false
	}
	r := Redaction{Org: env.Org, Namespace: env.Namespace, MemoryID: env.Revision.MemoryID, Versions: env.Redaction.Versions, Seq: env.Seq}
	if w := env.Redaction.Withdrawal; w != nil {
		r.Withdrawn, r.Purge = true, w.Purge
	}
	return r, true
}

// scrubs are, per table, what a redaction empties and the rows that still hold text.
// History and current rows keep their place, marked redacted; search rows keep their
// place (a row of the key replaces them by version) with no text, vector, tags or
// content hash; the versions' audit rows keep theirs with no subject.
func scrubs() []struct{ table, set, holds string } {
	return []struct{ table, set, holds string }{
		// The audit subject goes whole, as an erasure scrubs it (eraseMutation): the
		// content hash would confirm a guess of the text, and the subject commitment
		// takes a blanked subject only whole (key, hash, user id and salt, the agent and
		// session on a writer-format row); the redaction's own row, later in the chain,
		// names the memory and so explains the blank (auditchain's noteBlank).
		{"audit_log", auditScrub, auditHolds},
		// The content hash goes too: it would confirm a guess of the text, and Postgres
		// keeps none for a redacted row (its plain hash was sealed under the data key
		// the redaction destroyed; a replay of its record opens nothing either).
		{"memory_versions", "value = '', content_sha256 = '', tags = emptyArrayString(), entities = emptyArrayString(), redacted = 1",
			"(redacted = 0 OR value != '' OR content_sha256 != '' OR notEmpty(tags) OR notEmpty(entities))"},
		{"memory", "value = '', content_sha256 = '', tags = emptyArrayString(), entities = emptyArrayString(), redacted = 1",
			"(redacted = 0 OR value != '' OR content_sha256 != '' OR notEmpty(tags) OR notEmpty(entities))"},
		{"memory_embeddings", "embedding = emptyArrayFloat32(), key_embedding = emptyArrayFloat32(), embedding_dim = 0, tags = emptyArrayString(), content_sha256 = ''",
			"(notEmpty(embedding) OR notEmpty(key_embedding) OR notEmpty(tags) OR content_sha256 != '')"},
		{"memory_lexical", "terms = emptyArrayString(), tfs = emptyArrayUInt16(), doc_len = 0, tags = emptyArrayString(), content_sha256 = ''",
			"(notEmpty(terms) OR notEmpty(tags) OR content_sha256 != '')"},
		{"memory_chunks", "text = '', embedding = emptyArrayFloat32(), embedding_dim = 0, tombstone = 1, content_sha256 = ''",
			"(text != '' OR notEmpty(embedding) OR content_sha256 != '')"},
	}
}

func (r Redaction) where() (string, []any) {
	versions := make([]uint64, len(r.Versions))
	for i, v := range r.Versions {
		versions[i] = uint64(v)
	}
	return "(org = ? AND namespace = ? AND memory_id = toUUID(?) AND has(?, version))", []any{r.Org, r.Namespace, r.MemoryID, versions}
}

// copyRows is a withdrawal's predicate: the withdrawn copy's rows below its record.
func (r Redaction) copyRows() (string, []any) {
	return "(org = ? AND namespace = ? AND memory_id = toUUID(?) AND seq < ?)", []any{r.Org, r.Namespace, r.MemoryID, uint64(r.Seq)}
}

// withdrawnTables are the tables whose rows name a memory by its id: a withdrawn
// copy's go, its graph links after its part of the shared facts and its sightings after
// the entity rows only they held (withdraw, which takes those sightings already where
// the set holds the whole graph).
var withdrawnTables = []string{"memory", "memory_versions", "memory_embeddings", "memory_lexical", "memory_chunks", "audit_log",
	graphTripleOf, graphEdgeOf, graphSightings}

// Scrub applies redactions to every set of the projection tables that exists: one
// mutation per table, waited to completion, after each redaction's part of the graph
// went. A withdrawal's redaction drops its copy's rows instead (withdraw).
func Scrub(ctx context.Context, conn *ch.Conn, rs []Redaction) error {
	if len(rs) == 0 {
		return nil
	}
	var preds []string
	var args []any
	var plain []Redaction
	withdrawals := map[bool][]Redaction{}
	for _, r := range rs {
		if r.Withdrawn {
			withdrawals[r.Purge] = append(withdrawals[r.Purge], r)
			continue
		}
		plain = append(plain, r)
		w, a := r.where()
		preds, args = append(preds, w), append(args, a...)
	}
	scope := "(" + strings.Join(preds, " OR ") + ")"
	sets, err := tableset.Existing(ctx, conn)
	if err != nil {
		return err
	}
	for _, set := range sets {
		for purge, ws := range withdrawals {
			if err := withdraw(ctx, conn, set, ws, purge); err != nil {
				return err
			}
		}
		// The redacted versions' part of the graph goes first, found through the
		// memory's history and links.
		for _, r := range plain {
			if err := eraseRedactedGraph(ctx, conn, set, r); err != nil {
				return err
			}
		}
		if len(preds) == 0 {
			continue
		}
		for _, s := range scrubs() {
			if !set.Has(s.table) {
				continue
			}
			m := ch.Mutation{Table: set.Set.Name(s.table), Set: s.set, Where: scope + " AND " + s.holds, Args: args}
			if _, err := conn.Mutate(ctx, m); err != nil {
				return fmt.Errorf("scrub %s: %w", m.Table, err)
			}
		}
	}
	return nil
}

// withdraw drops withdrawn copies' rows from one set of the projection tables: every
// row below each one's record, except its audit rows outside a purge, which keep their
// place and lose their keys, content hashes and users as an erasure's do
// (eraseMutation).
func withdraw(ctx context.Context, conn *ch.Conn, set tableset.Present, ws []Redaction, purge bool) error {
	var preds []string
	var args []any
	ids := make([]string, len(ws))
	for i, r := range ws {
		ids[i] = strings.ToLower(r.MemoryID)
	}
	for _, r := range ws {
		// The facts only the copy observed go, found through its links, before them:
		// kept, they would also keep the erased user's own observation of them, since
		// the user's erasure keeps what another row still holds. The names only the
		// copies named go with them: an entity row names no memory, so the copies'
		// links and history find them.
		if err := eraseSharedGraph(ctx, conn, set, copyOwner(r)); err != nil {
			return err
		}
		if hasGraph(set) {
			if err := eraseOwnedEntities(ctx, conn, set, copyEntities(r, ids)); err != nil {
				return err
			}
		}
		w, a := r.copyRows()
		preds, args = append(preds, w), append(args, a...)
	}
	where := "(" + strings.Join(preds, " OR ") + ")"
	for _, table := range withdrawnTables {
		if !set.Has(table) {
			continue
		}
		m := ch.Mutation{Table: set.Set.Name(table), Where: where, Args: args}
		if table == "audit_log" && !purge {
			m.Set, m.Where = auditScrub, where+" AND "+auditHolds
		}
		if _, err := conn.Mutate(ctx, m); err != nil {
			return fmt.Errorf("withdraw the copies' rows from %s: %w", m.Table, err)
		}
	}
	return nil
}

package command

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/command/extraction"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/route"
)

// memory.import (POST /v1/namespaces/{ns}/memories:import) writes a list of texts
// through memory.bulk_set's path, each under a key that is a digest of its text, so a
// re-run of the same import changes nothing. It reads each key's newest version across
// the sessions of the request's identity first, and writes only the keys that have
// none or hold other text. The texts it writes or merges are kept in the
// conversation's record (source import), each linked to its memory, in the memories'
// own commit: a crash leaves no imported memory without the text it came from, and no
// text without its memory. Only an import that merges and writes nothing keeps its
// texts in a commit of their own, after (their memories stood before it).

const opImport = "memory.import"

// importItem is one text to import.
type importItem struct {
	Text        string             `json:"text"`
	ValidAt     *time.Time         `json:"valid_at"`
	MemoryType  string             `json:"memory_type"`
	Tags        []string           `json:"tags"`
	Sensitivity memrow.Sensitivity `json:"sensitivity"`
}

// importRequest is the body of memory.import.
type importRequest struct {
	Items     []importItem `json:"items"`
	Agent     string       `json:"agent"`
	UserID    string       `json:"user_id"`
	SessionID string       `json:"session_id"`
	DryRun    bool         `json:"dry_run"`
}

// Outcomes of an imported item beyond the write's own lists.
const (
	importWritten         = "written"          // a key with no version: a new memory
	importRevised         = "revised"          // the key's live version held other text
	importUnchanged       = "unchanged"        // the key's live version holds this text
	importSensitivityKept = "sensitivity_kept" // unchanged, and the item's other sensitivity is not applied
	importLeft            = "left"             // the key's newest version is deleted, retired, rejected or a proposal
	importRepeated        = "repeated"         // an earlier item of the request has the same text
)

type importOutcome struct {
	Index       int           `json:"index"`
	Key         string        `json:"key"`
	Outcome     string        `json:"outcome"`
	Verdict     Verdict       `json:"verdict,omitempty"`
	MemoryID    string        `json:"memory_id,omitempty"`
	VersionText string        `json:"version_text,omitempty"`
	Status      memrow.Status `json:"status,omitempty"`
	MergedInto  string        `json:"merged_into,omitempty"`
}

type importAnswer struct {
	Items  []importOutcome `json:"items"`
	Counts map[string]int  `json:"counts"`
	DryRun bool            `json:"dry_run,omitempty"`

	wrote bool
}

func (a *importAnswer) committed() bool { return a.wrote }

func (a *importAnswer) outcome() string {
	switch {
	case a.DryRun:
		return "dry_run"
	case !a.wrote:
		return "nothing_written"
	}
	return "ok"
}

type importCall struct {
	origin
	namespace string
	body      importRequest
}

// importKey is an item's key: ImportKeyPrefix and the first 24 hex digits of the
// SHA-256 of its text.
func importKey(text string) string {
	sum := sha256.Sum256([]byte(text))
	return memrow.ImportKeyPrefix + hex.EncodeToString(sum[:])[:memrow.ImportKeyHexLen]
}

// importItems is memory.import: it names each item's key, reads the keys' newest
// versions, and writes the items that change them through memory.bulk_set's path.
func (s *Service) importItems(ctx context.Context, p auth.Principal, r importCall) (*importAnswer, error) {
	req := r.body
	if len(req.Items) == 0 || len(req.Items) > MaxBulkEntries {
		return nil, httperr.Validation("items", fmt.Sprintf("items must hold 1 to %d items", MaxBulkEntries))
	}
	base, other, err := route.WriteIdentity(p, r.namespace, "", route.Names{Agent: req.Agent, UserID: req.UserID, SessionID: req.SessionID})
	if err != nil {
		return nil, err
	}
	if other {
		return nil, otherUser()
	}
	if err := validIdentity(base); err != nil {
		return nil, err
	}
	ans, keys, err := newImportAnswer(req)
	if err != nil {
		return nil, err
	}
	newest, err := s.newestAcrossSessions(ctx, base, keys)
	if err != nil {
		return nil, httperr.Store("reading the items' keys", err)
	}
	now := s.now()
	writes := importWrites(req.Items, base, keys, newest, now, ans)
	// Oldest first: under newest_wins the later of two statements of one attribute in a
	// batch retires the earlier.
	sort.SliceStable(writes, func(a, b int) bool { return writes[a].at.Before(writes[b].at) })
	if len(writes) > 0 {
		links, err := s.importCategoryLinks(ctx, base, req.Items, writes)
		if err != nil {
			return nil, httperr.Store("reading the items' category links", err)
		}
		var texts *turnBatch
		if !req.DryRun {
			if texts, err = s.sealImported(ctx, base, req.Items, writes); err != nil {
				return nil, err
			}
		}
		if err := s.writeImports(ctx, p, r, writes, links, texts, newest, now, ans); err != nil {
			return nil, err
		}
	}
	for _, o := range ans.Items {
		ans.Counts[o.Outcome]++
	}
	return ans, nil
}

// newImportAnswer names each item's key and marks an item whose text an earlier item
// holds as repeated.
func newImportAnswer(req importRequest) (*importAnswer, []string, error) {
	ans := &importAnswer{Items: make([]importOutcome, len(req.Items)), Counts: map[string]int{}, DryRun: req.DryRun}
	keys := make([]string, len(req.Items))
	first := map[string]int{}
	for i, it := range req.Items {
		if it.Text == "" {
			return nil, nil, httperr.Validation(fmt.Sprintf("items[%d].text", i), "text is required")
		}
		keys[i] = importKey(it.Text)
		ans.Items[i] = importOutcome{Index: i, Key: keys[i]}
		if _, dup := first[keys[i]]; dup {
			ans.Items[i].Outcome = importRepeated
		} else {
			first[keys[i]] = i
		}
	}
	return ans, keys, nil
}

// importWrite is an item to write: its place in the request, the identity it writes
// and when its statement holds from.
type importWrite struct {
	index int
	id    memrow.Identity
	at    time.Time
}

// importWrites answers the items whose key's newest version leaves nothing to write
// (left, unchanged) and returns the others, each under the identity it writes: a new
// key's is the request's, a revision's the version's own, in its own session.
func importWrites(items []importItem, base memrow.Identity, keys []string, newest map[string]*memrow.Row, now time.Time, ans *importAnswer) []importWrite {
	var writes []importWrite
	for i, it := range items {
		if ans.Items[i].Outcome != "" {
			continue
		}
		id := base
		id.MemoryKey = keys[i]
		h := newest[keys[i]]
		switch {
		case h == nil:
		case h.Tombstone || !h.Live(now) || h.Status == memrow.StatusSuperseded || h.Status == memrow.StatusRejected || h.Status == memrow.StatusProposed:
			ans.Items[i].Outcome, ans.Items[i].MemoryID = importLeft, h.MemoryID
			continue
		case memrow.ValueText(h.Value) == it.Text:
			ans.Items[i].Outcome, ans.Items[i].MemoryID = importUnchanged, h.MemoryID
			if it.Sensitivity != "" && it.Sensitivity != h.Sensitivity {
				ans.Items[i].Outcome = importSensitivityKept
			}
			continue
		default:
			id = h.Identity // revise the version the identity holds, in its own session
		}
		at := now
		if it.ValidAt != nil {
			at = *it.ValidAt
		}
		writes = append(writes, importWrite{index: i, id: id, at: at})
	}
	return writes
}

// writeImports writes the items through memory.bulk_set's path, in the order given,
// with the texts it writes or merges (texts, nil on a dry run), and answers each with
// what the write made of it.
func (s *Service) writeImports(ctx context.Context, p auth.Principal, r importCall, writes []importWrite, links *importLinks,
	texts *turnBatch, newest map[string]*memrow.Row, now time.Time, ans *importAnswer) error {
	req := r.body
	entries := make([]json.RawMessage, len(writes))
	for k, w := range writes {
		it := req.Items[w.index]
		it.Tags = links.itemTags(w.index, it)
		var err error
		if entries[k], err = importEntry(it, w.id); err != nil {
			return err
		}
	}
	opts := bulkOptions{op: opImport, checkAll: true, noRetire: true, noteCounts: links.counts}
	var record func(context.Context, pgx.Tx, []bulkResult, []bulkResult) error
	if len(links.added) > 0 {
		record = links.record(p.Actor())
	}
	opts.inWritten = func(ctx context.Context, tx pgx.Tx, written, merged []bulkResult) error {
		if record != nil {
			if err := record(ctx, tx, written, merged); err != nil {
				return err
			}
		}
		if texts == nil {
			return nil
		}
		return s.writeImported(ctx, tx, texts, written, merged)
	}
	b, err := s.runBulk(ctx, p, bulkCall{origin: r.origin, namespace: r.namespace, body: bulkRequest{Entries: entries, DryRun: req.DryRun}}, opts)
	if err != nil {
		return renameEntries(err, func(k int) string { return fmt.Sprintf("items[%d]", writes[k].index) })
	}
	ans.wrote = b.committed()
	if texts != nil && !ans.wrote && len(b.ans.Merged) > 0 {
		// Merges alone commit nothing: their texts are kept now, linked to the memories
		// they merged into.
		if err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error { return s.writeImported(ctx, tx, texts, nil, b.ans.Merged) }); err != nil {
			s.log.Warn("memory.import: the items merged; their texts are not kept as evidence",
				"org", p.Org, "namespace", r.namespace, "err", err)
		} else {
			s.relayWake.Queued()
		}
	}
	for k, f := range b.outcomes(now) {
		o := &ans.Items[writes[k].index]
		o.Verdict, o.MemoryID, o.VersionText, o.Status, o.MergedInto = Verdict(f.Verdict), f.MemoryID, f.VersionText, f.Status, f.MergedInto
		switch {
		case f.Verdict == string(VerdictMerge):
			o.Outcome = "merged"
		case f.Verdict == "skipped_unchanged":
			o.Outcome, o.Verdict = importUnchanged, ""
		case f.MemoryID == "":
			o.Outcome, o.Verdict = f.Verdict, ""
		case newest[o.Key] != nil:
			o.Outcome = importRevised
		default:
			o.Outcome = importWritten
		}
	}
	return nil
}

// importEntry is an item as a memory.bulk_set entry under id.
func importEntry(it importItem, id memrow.Identity) (json.RawMessage, error) {
	e := map[string]any{"key": id.MemoryKey, "value": it.Text, "agent": id.Agent, "user_id": id.UserID,
		"session_id": id.SessionID, "source_class": SourceImported}
	if it.ValidAt != nil {
		e["valid_at"] = it.ValidAt.UTC()
	}
	if it.MemoryType != "" {
		e["memory_type"] = it.MemoryType
	}
	if it.Tags != nil {
		e["tags"] = it.Tags
	}
	if it.Sensitivity != "" {
		e["sensitivity"] = it.Sensitivity
	}
	return json.Marshal(e)
}

// newestAcrossSessions is each key's newest version among the heads of the identity's
// agent and user, in any session.
func (s *Service) newestAcrossSessions(ctx context.Context, id memrow.Identity, keys []string) (map[string]*memrow.Row, error) {
	hs, err := heads.OfSubject(ctx, s.pool, id.Org, id.Namespace, id.Agent, id.UserID, keys)
	if err != nil {
		return nil, err
	}
	out := map[string]*memrow.Row{}
	for _, h := range hs {
		if cur := out[h.MemoryKey]; cur == nil || h.Version > cur.Version {
			out[h.MemoryKey] = h
		}
	}
	return out, nil
}

// renameEntries renames the batch entry a refusal names (entries[k].value) as the
// caller's own list names it (items[i].value).
func renameEntries(err error, name func(k int) string) error {
	rename := func(field string) string {
		var k int
		if n, _ := fmt.Sscanf(field, "entries[%d]", &k); n == 1 {
			return name(k) + field[strings.IndexByte(field, ']')+1:]
		}
		return field
	}
	var fe *memrow.FieldError
	if errors.As(err, &fe) {
		c := *fe
		c.Field = rename(fe.Field)
		return &c
	}
	var he *httperr.Error
	if errors.As(err, &he) && he.Field != "" {
		c := *he
		c.Field = rename(he.Field)
		return &c
	}
	return err
}

// sealImported seals the texts of the items an import means to write as turns of the
// request's session, in the order they are written (a record too large for the broker
// is refused before anything is written).
func (s *Service) sealImported(ctx context.Context, base memrow.Identity, items []importItem, writes []importWrite) (*turnBatch, error) {
	turns := make([]observedTurn, len(writes))
	for k, w := range writes {
		turns[k] = observedTurn{Role: "user", Content: items[w.index].Text, At: items[w.index].ValidAt}
	}
	base.MemoryKey = ""
	return s.sealTurns(ctx, base, turns, evidence.SourceImport)
}

// writeImported writes, in tx, the sealed texts of the batch entries written or merged,
// each linked to its memory; an entry the batch skipped keeps no text, so a re-run
// keeps nothing twice.
func (s *Service) writeImported(ctx context.Context, tx pgx.Tx, texts *turnBatch, written, merged []bulkResult) error {
	fact := map[int]extraction.Fact{}
	for _, r := range written {
		fact[r.Index] = extraction.Fact{MemoryID: r.MemoryID, VersionText: r.VersionText}
	}
	for _, r := range merged {
		fact[r.Index] = extraction.Fact{MergedInto: r.MergedInto}
	}
	var picked []int
	for k := range texts.rows {
		if _, ok := fact[k]; ok {
			picked = append(picked, k)
		}
	}
	if len(picked) == 0 {
		return nil
	}
	facts := make([]extraction.Fact, len(picked))
	for i, k := range picked {
		facts[i] = fact[k]
		facts[i].MessageIndex = i
	}
	kept, err := s.pickTurns(texts, picked)
	if err != nil {
		return err
	}
	return s.writeTurns(ctx, tx, kept, func(rows []evidence.Turn) []evidence.Link { return factLinks(rows, facts) })
}

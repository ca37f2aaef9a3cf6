package extraction

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
)

// memory.set_from_messages runs the seeds' DEFAULT_PIPELINE: named steps over one
// state, each reading and narrowing the facts the steps before it left. A request may
// reorder or skip them (steps, skip); the extraction itself may not be skipped.
const (
	stepCategories    = "loom.fetch_namespace_categories"
	stepExisting      = "loom.fetch_existing_memories"
	stepExtract       = "loom.llm_extract"
	stepRecallEchoes  = "loom.drop_recall_echoes"
	stepSessionEchoes = "loom.drop_session_echoes"
	stepNarration     = "loom.drop_activity_narration"
	stepNonDurable    = "loom.drop_non_durable"
	stepVerify        = "loom.verify_durable"
	stepHashDedup     = "loom.hash_dedup"
	stepBulkWrite     = "loom.bulk_write"
)

// defaultPipeline is the steps and their order when a request names none.
func defaultPipeline() []string {
	return []string{stepCategories, stepExisting, stepExtract, stepRecallEchoes, stepSessionEchoes, stepNarration,
		stepNonDurable, stepVerify, stepHashDedup, stepBulkWrite}
}

type pipelineStep func(pl *Pipeline, ctx context.Context, st *state) error

var pipelineSteps = map[string]pipelineStep{
	stepCategories:    (*Pipeline).fetchCategories,
	stepExisting:      (*Pipeline).fetchExisting,
	stepExtract:       (*Pipeline).extractFacts,
	stepRecallEchoes:  (*Pipeline).dropRecallEchoes,
	stepSessionEchoes: (*Pipeline).dropSessionEchoes,
	stepNarration: func(_ *Pipeline, _ context.Context, st *state) error {
		return st.drop(stepNarration, narrationReason)
	},
	stepNonDurable: func(_ *Pipeline, _ context.Context, st *state) error {
		return st.drop(stepNonDurable, nonDurableReason)
	},
	stepVerify:    (*Pipeline).verifyDurable,
	stepHashDedup: (*Pipeline).hashDedup,
	stepBulkWrite: (*Pipeline).writeFacts,
}

// sourceDerived is the facts' source_class: derived by a model from a conversation.
const sourceDerived = "derived"

// Session kinds: the non-durable drop and the verifier run on coding sessions only.
const (
	sessionChat   = "chat"
	sessionCoding = "coding"
)

// resolvePipeline is the steps a request runs: its own list, or the default one, less
// the ones it skips.
func resolvePipeline(steps, skip []string) ([]string, error) { return resolveSteps(steps, skip, nil) }

// resolveSteps is resolvePipeline with the steps an operator registered.
func resolveSteps(steps, skip []string, registered *Steps) ([]string, error) {
	for field, list := range map[string][]string{"steps": steps, "skip": skip} {
		seen := map[string]bool{}
		for _, name := range list {
			if pipelineSteps[name] == nil && registered.lookup(name) == nil {
				known := append(defaultPipeline(), registered.names()...)
				return nil, httperr.Validation(field, fmt.Sprintf("unknown step %q (the steps: %s)", name, strings.Join(known, ", ")))
			}
			if seen[name] {
				return nil, httperr.Validation(field, fmt.Sprintf("step %q is named twice", name))
			}
			seen[name] = true
		}
	}
	out := defaultPipeline()
	if len(steps) > 0 {
		out = slices.Clone(steps)
	}
	out = slices.DeleteFunc(out, func(n string) bool { return slices.Contains(skip, n) })
	if !slices.Contains(out, stepExtract) {
		return nil, httperr.Validation("skip", stepExtract+" is the extraction itself: a pipeline without it extracts nothing")
	}
	return out, nil
}

// candidate is one extracted fact on its way through the steps.
type candidate struct {
	rawKey, key, value string
	msg                int // the message that states it
	tags               []string
	sha                string
	droppedBy, reason  string
	duplicateOf        string // hash_dedup: the memory that already holds the value
	aboutAgent         bool   // a rule about the agent itself: filed to the learnings queue, never a memory
}

// forgetting is a key the transcript asks to forget.
type forgetting struct {
	key string
	msg int
}

// state is one request's pipeline state.
type state struct {
	p        auth.Principal
	ns       string
	req      *Request
	identity memrow.Identity // the facts' identity, without a key
	bill     llm.Bill
	writer   Writer

	categories []string
	existing   []*memrow.Row
	facts      []*candidate // live, in transcript order
	dropped    []*candidate
	forgets    []forgetting
	written    *Written
	learnings  []*candidate // the rules loom.bulk_write filed to the learnings queue

	mu         sync.Mutex // the model calls' counts, which concurrent windows add to
	modelCalls int
	modelTime  time.Duration
	usage      llm.Usage
	steps      []StepReport
}

// StepReport is what one step did, for the answer.
type StepReport struct {
	Name       string  `json:"name"`
	Facts      int     `json:"facts"` // facts left after it
	Dropped    int     `json:"dropped,omitempty"`
	ModelCalls int     `json:"model_calls,omitempty"`
	Ms         float64 `json:"ms"`
}

// run runs the steps in order, each timed.
func (st *state) run(ctx context.Context, pl *Pipeline, steps []string) error {
	for _, name := range steps {
		start, calls, dropped := time.Now(), st.modelCalls, len(st.dropped)
		step := pipelineSteps[name]
		if step == nil {
			step = registeredStep(name, pl.Registered.lookup(name))
		}
		if err := step(pl, ctx, st); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		st.steps = append(st.steps, StepReport{Name: name, Facts: len(st.facts), Dropped: len(st.dropped) - dropped,
			ModelCalls: st.modelCalls - calls, Ms: float64(time.Since(start).Microseconds()) / 1000})
	}
	return nil
}

// drop removes the facts rule names a reason for.
func (st *state) drop(step string, rule func(*state, *candidate) string) error {
	kept := st.facts[:0]
	for _, c := range st.facts {
		if reason := rule(st, c); reason != "" {
			c.droppedBy, c.reason = step, reason
			st.dropped = append(st.dropped, c)
			continue
		}
		kept = append(kept, c)
	}
	st.facts = kept
	return nil
}

func narrationReason(_ *state, c *candidate) string {
	if narration(c.value) {
		return "narrates tool activity with no durable outcome"
	}
	return ""
}

func nonDurableReason(st *state, c *candidate) string {
	if st.req.SessionKind == sessionCoding && nonDurable(c.value) {
		return "a status snapshot, housekeeping or a plan"
	}
	return ""
}

// complete makes one model call of the request and counts it, its time and its cost;
// concurrent calls of one request may count at once.
func (st *state) complete(ctx context.Context, pl *Pipeline, req llm.Request, out any) error {
	req.Bill = st.bill
	start := time.Now()
	ans, err := pl.Models.CompleteJSON(ctx, req, out)
	took := time.Since(start)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.modelTime += took
	st.modelCalls += max(ans.Attempts, 1)
	st.usage.PromptTokens += ans.Usage.PromptTokens
	st.usage.CompletionTokens += ans.Usage.CompletionTokens
	st.usage.CostUSD += ans.Usage.CostUSD
	return err
}

// maxCategories bounds the tags shown to the extractor.
const maxCategories = 50

// fetchCategories reads the namespace's tags in use, most used first, over a sample of
// its heads: the taxonomy the extractor tags facts from. A head stored with no tags
// list (a JSON null, written before migration 058 repaired them) counts as none.
func (pl *Pipeline) fetchCategories(ctx context.Context, st *state) error {
	var err error
	st.categories, err = heads.Tags(ctx, pl.Pool, st.p.Org, st.ns, 2000, maxCategories)
	if err != nil {
		return httperr.Store("reading the namespace's categories", err)
	}
	return nil
}

// existingText is how much of a transcript the nearest memories are found by.
const existingText = 4000

// fetchExisting reads the stored facts nearest the transcript (the peers a write of
// its text would have, of the subject's own rows), so the extractor reuses their keys
// and does not repeat them.
func (pl *Pipeline) fetchExisting(ctx context.Context, st *state) error {
	var b strings.Builder
	for _, m := range st.req.Messages {
		if m.Role == roleUser || m.Role == roleAssistant {
			b.WriteString(m.Content)
			b.WriteByte('\n')
		}
	}
	rows, err := st.writer.Nearest(ctx, st.identity, st.memoryType(), st.subjectUser(), clip(b.String(), existingText))
	if err != nil {
		return err
	}
	st.existing = append(st.existing, rows...)
	return nil
}

// subjectUser is the user whose rows the steps read: the facts' user, or for the
// anonymous user whatever the token reads.
func (st *state) subjectUser() string {
	if st.identity.UserID != memrow.DefaultIdentity {
		return st.identity.UserID
	}
	return st.p.ReadUserID
}

func (st *state) memoryType() string {
	if st.req.MemoryType != "" {
		return st.req.MemoryType
	}
	return memrow.DefaultMemoryType
}

// extractFacts is the extraction call, one per window of the transcript, at most
// LOOM_LLM_CONCURRENCY at once; the windows' facts are merged in transcript order.
func (pl *Pipeline) extractFacts(ctx context.Context, st *state) error {
	ws := windows(st.req.Messages, pl.Config.WindowChars)
	answers := make([]extractionAnswer, len(ws))
	errs := make([]error, len(ws))
	system := extractionPrompt(st.categories, st.existing)
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = st.complete(ctx, pl, llm.Request{Schema: extractionSchema, Messages: []llm.Message{
				{Role: llm.RoleSystem, Content: system}, {Role: llm.RoleUser, Content: transcript(st.req.Messages, w)}}}, &answers[i])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	facts, forgets := mergeWindows(ws, answers)
	st.forgets = forgets
	for _, c := range facts {
		if c.key == "" || c.value == "" {
			c.droppedBy, c.reason = stepExtract, "no key naming a subject and attribute, or no value"
			st.dropped = append(st.dropped, c)
			continue
		}
		st.facts = append(st.facts, c)
	}
	return nil
}

// dropRecallEchoes drops facts that restate memories the session was served.
func (pl *Pipeline) dropRecallEchoes(ctx context.Context, st *state) error {
	if len(st.req.RecalledKeys) == 0 || len(st.facts) == 0 {
		return nil
	}
	rows, err := pl.subjectHeads(ctx, st, keysIn3, st.req.RecalledKeys)
	if err != nil {
		return httperr.Store("reading the recalled memories", err)
	}
	return st.drop(stepRecallEchoes, echoReason(rows, "restates the recalled memory "))
}

// dropSessionEchoes drops facts that restate what the session's own Loom calls wrote
// (its heads) or read (session_keys).
func (pl *Pipeline) dropSessionEchoes(ctx context.Context, st *state) error {
	if len(st.facts) == 0 || (st.identity.SessionID == memrow.DefaultIdentity && len(st.req.SessionKeys) == 0) {
		return nil
	}
	session := ""
	if st.identity.SessionID != memrow.DefaultIdentity {
		session = st.identity.SessionID
	}
	rows, err := pl.subjectHeads(ctx, st, `(session_id = (SELECT loom.session_ref($1, $4)) OR `+keysIn3+`)`, st.req.SessionKeys, session)
	if err != nil {
		return httperr.Store("reading the session's memories", err)
	}
	return st.drop(stepSessionEchoes, echoReason(rows, "restates what the session already holds: "))
}

func echoReason(rows []*memrow.Row, why string) func(*state, *candidate) string {
	return func(_ *state, c *candidate) string {
		if r := echoOf(c.value, rows); r != nil {
			return why + r.MemoryKey
		}
		return ""
	}
}

// maxEchoRows bounds the heads an echo step reads.
const maxEchoRows = 500

// keysIn3 is a subjectHeads condition: the head's key is one of the keys $3. The column
// holds each key's reference (loom.key_ref, migration 171), computed once a statement,
// as the agent and session columns hold theirs (migration 173).
const keysIn3 = `memory_key = ANY((SELECT loom.key_refs($1, $3::text[]))::text[])`

// subjectHeads reads the live heads of the namespace that where selects, among the
// subject's rows ($1 org, $2 namespace; where's own arguments from $3).
func (pl *Pipeline) subjectHeads(ctx context.Context, st *state, where string, args ...any) ([]*memrow.Row, error) {
	hs, err := heads.OfUser(ctx, pl.Pool, st.p.Org, st.ns, st.subjectUser(), maxEchoRows, where, args...)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(hs, func(h *memrow.Row) bool { return !live(h) }), nil
}

// verifyDurable asks the model which of a coding session's facts are durable and
// drops the others. It fails open: any failure of the call keeps every fact.
func (pl *Pipeline) verifyDurable(ctx context.Context, st *state) error {
	if st.req.SessionKind != sessionCoding || len(st.facts) == 0 {
		return nil
	}
	var a verificationAnswer
	err := st.complete(ctx, pl, llm.Request{Schema: verificationSchema, Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: verificationInstructions}, {Role: llm.RoleUser, Content: verificationPrompt(st.facts)}}}, &a)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		pl.Log.Info("extraction: the verifier pass failed; keeping every fact", "namespace", st.ns, "err", err)
		return nil
	}
	notDurable := map[int]bool{}
	for _, v := range a.Verdicts {
		if !v.Durable {
			notDurable[v.Index] = true
		}
	}
	index := map[*candidate]int{}
	for i, c := range st.facts {
		index[c] = i
	}
	return st.drop(stepVerify, func(_ *state, c *candidate) string {
		if notDurable[index[c]] {
			return "the verifier judged it not durable"
		}
		return ""
	})
}

// hashDedup drops facts whose canonical value the subject's live rows already hold,
// and of two facts with one value all but the later.
func (pl *Pipeline) hashDedup(ctx context.Context, st *state) error {
	if len(st.facts) == 0 {
		return nil
	}
	last := map[string]*candidate{}
	var shas []string
	for _, c := range st.facts {
		c.sha = memrow.ContentSHA256(stringValue(c.value))
		if _, seen := last[c.sha]; !seen {
			shas = append(shas, c.sha)
		}
		last[c.sha] = c
	}
	// A head stores its hash keyed under its scope's key (migration 101): the values
	// are hashed under the keys of the subject's scopes (every user's when the
	// subject is none); a head not yet rehashed by the at-rest pass holds the plain one.
	rows, err := pl.subjectHeads(ctx, st, `content_sha256 IN (SELECT s FROM unnest($3::text[]) s
		UNION SELECT loom.content_hash(k.org, k.namespace, k.user_id, s) FROM loom.content_keys k, unnest($3::text[]) s
		WHERE k.org = $1 AND k.namespace = $2 AND ($4 = '' OR k.user_id = (SELECT loom.user_ref($1, $4))))`, shas, st.subjectUser())
	if err != nil {
		return httperr.Store("reading the stored hashes", err)
	}
	stored := map[string]*memrow.Row{}
	for _, r := range rows {
		stored[r.ContentSHA256] = r
	}
	return st.drop(stepHashDedup, func(_ *state, c *candidate) string {
		// A rule about the agent is no memory's value, whatever memory holds its words.
		if r := stored[c.sha]; r != nil && !c.aboutAgent {
			c.duplicateOf = r.MemoryID
			return "the memory " + r.MemoryKey + " already holds this value"
		}
		if last[c.sha] != c {
			return "a later fact of the transcript states the same value"
		}
		return ""
	})
}

// stringValue is a fact's value as the canonical JSON string it is stored as.
func stringValue(v string) []byte {
	b, _ := json.Marshal(v)
	c, err := memrow.Canonical("value", b)
	if err != nil {
		return b
	}
	return c
}

// writeFacts writes the facts through memory.bulk_set's path, every fact judged as any
// write is, and in the same commit retires the rows the transcript asked to forget.
//
// A rule about the agent itself (about="agent") is never written as a memory: it is
// filed to the learnings queue with the message that supports it, in the same commit.
func (pl *Pipeline) writeFacts(ctx context.Context, st *state) error {
	retire, err := pl.forgotten(ctx, st)
	if err != nil {
		return err
	}
	var learnings []Learning
	st.facts = slices.DeleteFunc(st.facts, func(c *candidate) bool {
		if c.aboutAgent {
			st.learnings = append(st.learnings, c)
			learnings = append(learnings, Learning{Rule: c.value, MessageIndex: c.msg, Quote: st.req.Messages[c.msg].Content})
		}
		return c.aboutAgent
	})
	if len(st.facts) == 0 && len(retire) == 0 && len(learnings) == 0 {
		return nil
	}
	entries := make([]json.RawMessage, len(st.facts))
	msgs := make([]int, len(st.facts))
	for i, c := range st.facts {
		entries[i], err = st.entry(c)
		if err != nil {
			return err
		}
		msgs[i] = c.msg
	}
	b, err := st.writer.Write(ctx, Write{Principal: st.p, Namespace: st.ns, Entries: entries, DryRun: st.req.DryRun, Retire: retire,
		MessageIndex: msgs, Learnings: learnings, Identity: st.identity})
	if err != nil {
		return err
	}
	st.written = b
	return nil
}

// entry is a fact as a memory.bulk_set entry: a derived fact of the request's identity
// and type, tagged with the namespace's categories the model chose and the request's tags.
func (st *state) entry(c *candidate) (json.RawMessage, error) {
	var tags []string
	for _, t := range c.tags {
		if slices.Contains(st.categories, t) && !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	for _, t := range st.req.Tags {
		if !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	e := map[string]any{"key": c.key, "value": c.value, "agent": st.identity.Agent, "user_id": st.identity.UserID,
		"session_id": st.identity.SessionID, "source_class": sourceDerived}
	if len(tags) > 0 && memrow.ValidateTags(tags) == nil {
		e["tags"] = tags
	}
	if st.req.MemoryType != "" {
		e["memory_type"] = st.req.MemoryType
	}
	if at := st.req.Messages[c.msg].At; at != nil {
		e["valid_at"] = at.UTC()
	}
	return json.Marshal(e)
}

// forgotten are the subject's live rows of the keys the transcript asks to forget.
func (pl *Pipeline) forgotten(ctx context.Context, st *state) ([]memrow.Identity, error) {
	if len(st.forgets) == 0 {
		return nil, nil
	}
	keys := make([]string, len(st.forgets))
	for i, f := range st.forgets {
		keys[i] = f.key
	}
	where := keysIn3
	args := []any{keys}
	if st.identity.UserID == memrow.DefaultIdentity {
		where, args = keysIn3+` AND user_id = '-' AND agent = (SELECT loom.agent_ref($1, $4))`, append(args, st.identity.Agent)
	}
	rows, err := pl.subjectHeads(ctx, st, where, args...)
	if err != nil {
		return nil, httperr.Store("reading the memories to forget", err)
	}
	var out []memrow.Identity
	for _, r := range rows {
		out = append(out, r.Identity)
	}
	return out, nil
}

// Pipeline runs memory.set_from_messages' steps: its model calls go to Models, its
// reads of the heads to Pool, its writes to the run's Writer.
type Pipeline struct {
	Pool   *pgxpool.Pool
	Models *llm.Provider
	Log    *slog.Logger
	Config config.Extraction // the windows' size and the transcript's limit
	// Registered are the steps an operator registered (register_step); nil: none.
	Registered *Steps
}

// Check validates a request before anything runs and resolves its steps.
func (pl *Pipeline) Check(req *Request, id memrow.Identity) ([]string, error) {
	return check(req, id, pl.Config.MaxChars, pl.Registered)
}

// Run is one request's run: as whom, into which identity, and the writer of its facts.
type Run struct {
	Principal auth.Principal
	Namespace string
	Identity  memrow.Identity // the facts' identity, without a key
	Request   *Request
	Writer    Writer
}

// Run runs steps over a request, checked (Check), and answers what it did.
func (pl *Pipeline) Run(ctx context.Context, r Run, steps []string) (*Answer, error) {
	st := &state{p: r.Principal, ns: r.Namespace, req: r.Request, identity: r.Identity, writer: r.Writer,
		bill: llm.Bill{Org: r.Principal.Org, Namespace: r.Namespace, Purpose: llm.PurposeExtraction}}
	if err := st.run(ctx, pl, steps); err != nil {
		return nil, err
	}
	return st.answer(slices.Contains(steps, stepBulkWrite)), nil
}

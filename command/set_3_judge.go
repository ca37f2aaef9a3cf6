package command

import (
	"context"
	"errors"
	"time"

	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/searchindex"
	"github.com/loomplane/loom/internal/text"
)

// Stage 3, judge (set.go lists the stages): embed the admitted value, read its peers
// (the namespace's rows nearest it, from the process's index or ClickHouse, checked
// against their Postgres heads) and reach the verdict.

// Verdict is what a write's admission made of it against its peers, and what the
// answer says of each peer it judged. No verdict calls a model.
type Verdict string

// Verdicts a write can reach against its peers.
const (
	VerdictNew         Verdict = "new"         // no close peer: the row is a fact of its own
	VerdictRestatement Verdict = "restatement" // the key's own live value again: reinforced
	VerdictMerge       Verdict = "merge"       // a peer holds the same canonical value: nothing is written
	VerdictDuplicate   Verdict = "duplicate"   // a near-identical peer: written, not served, linked to it
	VerdictRefines     Verdict = "refines"     // newest_wins: another object for the peer's subject and predicate; the peer retires
	VerdictConflict    Verdict = "conflict"    // a close peer that says something else: both rows flagged
	VerdictPinned      Verdict = "pinned"      // a close pinned peer: the write is refused (409)
	// A judged peer that decided nothing: out of reach, or within it while another
	// peer decided.
	VerdictBelow Verdict = "below_threshold"
	VerdictClose Verdict = "close"
	// A close peer of another subject (sameSubject), which only its pin makes count.
	VerdictOtherSubject Verdict = "other_subject"
	// A peer the namespace's conflict allowlist pairs with the write's row
	// (conflict_allowlist.go): it is not judged.
	VerdictAllowlisted Verdict = "allowlisted"
)

// peer is a row another key holds, with its cosine to the write's value.
type peer struct {
	row    *memrow.Row
	cosine float64
	vector []float32 // set for a gap row a batch measures against each entry
}

// judgedPeer is how the answer names each peer the verdict looked at.
type judgedPeer struct {
	MemoryID  string  `json:"memory_id"`
	MemoryKey string  `json:"memory_key"`
	Agent     string  `json:"agent"`
	UserID    string  `json:"user_id"`
	SessionID string  `json:"session_id"`
	Cosine    float64 `json:"cosine"`
	Verdict   Verdict `json:"verdict"`
}

// verdict is the outcome of judging a write against its peers.
type verdict struct {
	kind      Verdict
	target    *memrow.Row   // merge, duplicate and refines: the peer acted on
	conflicts []*memrow.Row // conflict: every close peer that says something else
	judged    []judgedPeer
}

func (v verdict) peersJudged() []peer {
	var out []peer
	for _, r := range v.conflicts {
		out = append(out, peer{row: r})
	}
	if v.target != nil {
		out = append(out, peer{row: v.target})
	}
	return out
}

// embedEntries embeds, in one call, the value, the key's words and a long value's
// chunks of every embedded entry that has no vector yet (a later round reuses them),
// and stamps each embedded row with the model. Only an embedded row has a search
// document.
func (s *Service) embedEntries(ctx context.Context, entries []*entry, doing string) error {
	for _, e := range entries {
		if a := e.w.ahead; a != nil {
			e.w.ahead = nil
			if err := a.take(e.row.Embedded() && e.w.vector == nil); err != nil {
				return embedError(doing, err)
			}
		}
	}
	var ws []*setWrite
	for _, e := range entries {
		if e.row.Embedded() && e.w.vector == nil {
			ws = append(ws, e.w)
		}
	}
	if err := s.embedWrites(ctx, ws); err != nil {
		return embedError(doing, err)
	}
	for _, e := range entries {
		if e.row.Embedded() {
			e.row.EmbeddingModel, e.row.EmbeddingDim = s.embedder.Model(), len(e.w.vector)
		}
	}
	s.remember(entries)
	return nil
}

// embedRows builds, in one call, the search documents of the rows that have one (live,
// embedded, not redacted), for a writer that copies rows it did not admit (a restore,
// a rollback), and stamps each such row with the model.
func (s *Service) embedRows(ctx context.Context, ps []*pending) error {
	var ws []*setWrite
	var embedded []*pending
	for _, p := range ps {
		r := p.row
		if r.Tombstone || r.Redacted || !r.Embedded() {
			continue
		}
		w := &setWrite{id: r.Identity}
		w.setValue(r.Value)
		ws, embedded = append(ws, w), append(embedded, p)
	}
	if err := s.embedWrites(ctx, ws); err != nil {
		return embedError("embedding the values", err)
	}
	for i, p := range embedded {
		p.vector, p.keyVector, p.chunkVectors = ws[i].vector, ws[i].keyVector, ws[i].chunkVectors
		p.row.EmbeddingModel, p.row.EmbeddingDim = s.embedder.Model(), len(ws[i].vector)
	}
	return nil
}

// embedWrites embeds the writes' texts in one call and hands each its vectors.
func (s *Service) embedWrites(ctx context.Context, ws []*setWrite) error {
	var texts []string
	var splits []func([][]float32)
	var sizes []int
	for _, w := range ws {
		ts, split := embedTexts(w)
		texts = append(texts, ts...)
		splits, sizes = append(splits, split), append(sizes, len(ts))
	}
	if len(texts) == 0 {
		return nil
	}
	vs, err := s.embedder.Embed(ctx, texts)
	if err != nil {
		return err
	}
	for i, split := range splits {
		split(vs[:sizes[i]])
		vs = vs[sizes[i]:]
	}
	return nil
}

// embedError answers an embedder that failed while doing what: unavailable, it is a
// retryable 503.
func embedError(doing string, err error) error {
	if errors.Is(err, embed.ErrEmbedderUnavailable) {
		return httperr.Unavailable(httperr.CodeEmbedderDown, "the embedder is unavailable; retry", err)
	}
	return httperr.Store(doing, err)
}

// embedTexts lists a write's texts to embed and returns the function that hands the
// vectors back to it.
func embedTexts(w *setWrite) ([]string, func([][]float32)) {
	texts := []string{w.valueText}
	keyWords := memrow.KeyWords(w.id.MemoryKey)
	if keyWords != "" {
		texts = append(texts, keyWords)
	}
	chunks := text.Chunks(w.valueText)
	texts = append(texts, chunks...)
	return texts, func(vs [][]float32) {
		w.vector, vs = vs[0], vs[1:]
		if keyWords != "" {
			w.keyVector, vs = vs[0], vs[1:]
		}
		w.chunkVectors = vs[:len(chunks)]
	}
}

// seeksPeers reports whether the entry is judged against the namespace's rows: an
// embedded row, not a restatement, under a policy that judges.
func (e *entry) seeksPeers(policy string) bool {
	return e.row.Embedded() && !e.restatement && policy != PolicyAppendOnly
}

func (e *entry) peerQuery() peerQuery {
	return peerQuery{id: e.w.id, memoryType: e.row.MemoryType, vector: e.w.vector, readUserID: e.w.p.ReadUserID}
}

// reach is the lowest cosine at which a peer can change a write's verdict: the conflict
// threshold, or the resolver's floor when it is on and lower (a peer at the floor marks
// the write for judgement, so the verdict must see it too).
func reach(threshold, judgementFloor float64) float64 {
	if judgementFloor > 0 && judgementFloor < threshold {
		return judgementFloor
	}
	return threshold
}

// setPeers are the peers a write's verdict judges: the namespace's rows nearest its
// value, read from the process's index (fromIndex) or ClickHouse, and the gap rows
// earlier rounds measured.
func (s *Service) setPeers(ctx context.Context, e *entry, r admissionRules, fromIndex bool) ([]peer, error) {
	if e.restatement {
		return nil, nil
	}
	var peers []peer
	if e.seeksPeers(r.conflictPolicy()) {
		q := e.peerQuery()
		// Within vectorMargin of the threshold an int8 cosine may be a float32 one over it.
		q.headsFrom, q.sha = reach(e.threshold, r.judgementFloor)-vectorMargin, e.w.sha
		var err error
		if peers, err = s.readPeers(ctx, q, fromIndex); err != nil {
			return nil, peerReadError("reading the write's peers", err)
		}
	}
	return mergePeers(peers, e.w.absorbed), nil
}

// peerQuery is what a write's peer read is narrowed to.
type peerQuery struct {
	id         memrow.Identity
	memoryType string
	vector     []float32
	readUserID string // a token bound to one user: peers are that user's rows, and pinned rows of anyone
	// headsFrom: a row the index finds below this cosine, of another value than sha,
	// decides nothing, so the verdict names it as the index has it and its head is
	// not read (0: every row's head is read).
	headsFrom float64
	sha       string
}

// peerDoc is a search document a peer read found, before its head is checked.
type peerDoc struct {
	id       memrow.Identity
	memoryID string // set by the index's read
	sha      string
	cosine   float64
}

// far reports whether a doc of the index's read is out of the verdict's reach.
func (q peerQuery) far(d peerDoc) bool {
	return q.headsFrom > 0 && d.memoryID != "" && d.cosine < q.headsFrom && d.sha != q.sha
}

// errPeersMoved sends a write to another round: the index dropped the namespace (past
// its memory budget) between the round's capture and its peer read, so the capture
// does not cover a read the ClickHouse path would now serve.
var errPeersMoved = errors.New("the namespace's peers moved from the index to ClickHouse since the capture")

// readPeers returns the rows of other keys nearest the write's value: read from the
// process's search index when the round captured its position (fromIndex), else from
// the search documents in ClickHouse, then checked against their Postgres heads, which
// are what the verdict judges. A document whose head moved on is left out: the
// admission's gap check covers what moved. A row of the index's read out of the
// verdict's reach (q.far) is named as the index has it, without its head: it decides
// nothing, and most writes have no peer in reach, so most skip the heads' round trip.
func (s *Service) readPeers(ctx context.Context, q peerQuery, fromIndex bool) ([]peer, error) {
	var docs []peerDoc
	var err error
	if fromIndex {
		docs, err = s.indexPeers(q)
	} else {
		docs, err = s.clickhousePeers(ctx, q)
	}
	if err != nil || len(docs) == 0 {
		return nil, err
	}
	var ids []memrow.Identity
	for _, d := range docs {
		if !q.far(d) {
			ids = append(ids, d.id)
		}
	}
	current := map[string]*memrow.Row{}
	if len(ids) > 0 {
		if current, err = heads.Many(ctx, s.pool, q.id.Org, q.id.Namespace, ids); err != nil {
			return nil, err
		}
	}
	now := s.now()
	out := make([]peer, 0, len(docs))
	// The far rows in one allocation, not one each: most of a write's peers are far.
	// Its capacity is their number, so no append moves a row a peer points at.
	farRows := make([]memrow.Row, 0, len(docs)-len(ids))
	for _, d := range docs {
		if q.far(d) {
			farRows = append(farRows, memrow.Row{Identity: d.id, MemoryID: d.memoryID, MemoryType: q.memoryType, ContentSHA256: d.sha})
			out = append(out, peer{row: &farRows[len(farRows)-1], cosine: d.cosine})
			continue
		}
		h := current[heads.IdentityKey(d.id)]
		if h == nil || h.ContentSHA256 != d.sha || !isPeer(h, q, now) {
			continue
		}
		out = append(out, peer{row: h, cosine: d.cosine})
	}
	return out, nil
}

// indexPeers is the peer read from the process's search index.
func (s *Service) indexPeers(q peerQuery) ([]peerDoc, error) {
	found, _, err := s.index.Peers(searchindex.Space{Org: q.id.Org, Namespace: q.id.Namespace}, searchindex.PeerQuery{
		MemoryType: q.memoryType, MemoryKey: q.id.MemoryKey, ReadUserID: q.readUserID, Vector: q.vector,
		Limit: s.cfg.PeerLimit, Now: s.now()})
	if errors.Is(err, searchindex.ErrNotHeld) {
		return nil, errPeersMoved
	}
	docs := make([]peerDoc, len(found))
	for i, p := range found {
		docs[i] = peerDoc{id: memrow.Identity{Org: q.id.Org, Namespace: q.id.Namespace, Agent: p.Agent, UserID: p.UserID,
			SessionID: p.SessionID, MemoryKey: p.MemoryKey}, memoryID: p.MemoryID, sha: p.ContentSHA256, cosine: p.Cosine}
	}
	return docs, err
}

// isPeer is the peer rule, applied to a head: a served row of the same type under
// another key, in the writer's read scope unless pinned. The same key in another
// session is not a peer: markSameKey (set_4_rows.go) judges it.
func isPeer(h *memrow.Row, q peerQuery, now time.Time) bool {
	if !h.Served(now) || h.MemoryType != q.memoryType || h.MemoryKey == q.id.MemoryKey {
		return false
	}
	return q.readUserID == "" || h.UserID == q.readUserID || h.Pinned
}

// batchPeers are what a batch entry is judged against beside the namespace's peers it
// read (external): the namespace's heads that hold its exact value (sameValue), the
// batch's earlier written entries of its type under other keys, and the gap rows
// earlier rounds measured.
func (e *entry) batchPeers(external []peer, sameValue []*memrow.Row, earlier []*entry, absorbed []peer, now time.Time) []peer {
	q := e.peerQuery()
	peers := external
	for _, h := range sameValue {
		if isPeer(h, q, now) {
			peers = append(peers, peer{row: h, cosine: 1})
		}
	}
	if e.row.Embedded() {
		for _, b := range earlier {
			if b.row.MemoryType == e.row.MemoryType && b.row.MemoryKey != e.row.MemoryKey &&
				(q.readUserID == "" || b.row.UserID == q.readUserID || b.row.Pinned) {
				peers = append(peers, peer{row: b.row, cosine: embed.Dot(b.w.vector, e.w.vector)})
			}
		}
	}
	var gap []peer
	for _, a := range absorbed {
		if isPeer(a.row, q, now) {
			gap = append(gap, peer{row: a.row, cosine: embed.Dot(a.vector, e.w.vector)})
		}
	}
	return mergePeers(peers, gap)
}

// mergePeers overlays newer rows of the same keys on a peer list, nearest first;
// a row that is no longer a peer (cosine -1) removes its key.
func mergePeers(base, newer []peer) []peer {
	out := append([]peer(nil), base...)
	// Most writes have no newer rows: their peers are not keyed (a string a peer).
	var idx map[string]int
	if len(newer) > 0 {
		idx = make(map[string]int, len(out)+len(newer))
		for i, p := range out {
			idx[heads.IdentityKey(p.row.Identity)] = i
		}
	}
	for _, p := range newer {
		k := heads.IdentityKey(p.row.Identity)
		if i, ok := idx[k]; ok {
			out[i] = p
		} else {
			idx[k] = len(out)
			out = append(out, p)
		}
	}
	kept := out[:0]
	for _, p := range out {
		if p.cosine >= 0 {
			kept = append(kept, p)
		}
	}
	sortPeers(kept)
	return kept
}

func sortPeers(ps []peer) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].cosine > ps[j-1].cosine; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

// judge reaches an admitted entry's verdict against its peers, nearest first (decide
// holds the rules). A restatement is not judged; a close pinned peer refuses the entry.
// A peer the namespace's allowlist pairs with the entry's row is left out of the
// verdict (memory.set step 10: allowlisted pairs skip the check), and named so.
func judge(e *entry, peers []peer, r admissionRules) (verdict, *refusal) {
	e.listed = r.policy
	if e.restatement {
		return verdict{kind: VerdictRestatement}, nil
	}
	peers, allowed := withoutAllowed(e.row, peers, r.policy)
	v := decide(verdictInput{row: e.row, valueText: e.w.valueText, policy: r.conflictPolicy(),
		threshold: e.threshold, duplicateThreshold: r.duplicateThreshold, peers: peers})
	v.judged = append(v.judged, allowed...)
	if v.kind == VerdictPinned {
		return v, &refusal{kind: refusedPinnedPeer}
	}
	if owesJudgement(e.row, v, peers, r.judgementFloor) {
		e.row.JudgementOwed = true
	}
	return v, nil
}

// withoutAllowed splits off the peers the namespace's allowlist pairs with row, and
// names each as the answer does.
func withoutAllowed(row *memrow.Row, peers []peer, pol *policy) ([]peer, []judgedPeer) {
	if pol == nil || len(pol.allowed) == 0 || row.MemoryID == "" {
		return peers, nil
	}
	var kept []peer
	var allowed []judgedPeer
	for _, p := range peers {
		if !pol.allowlisted(row.MemoryID, p.row.MemoryID) {
			kept = append(kept, p)
			continue
		}
		allowed = append(allowed, judgedPeer{MemoryID: p.row.MemoryID, MemoryKey: p.row.MemoryKey, Agent: p.row.Agent,
			UserID: p.row.UserID, SessionID: p.row.SessionID, Cosine: round4(p.cosine), Verdict: VerdictAllowlisted})
	}
	return kept, allowed
}

// verdictInput is everything decide needs; it reads no store.
type verdictInput struct {
	row                *memrow.Row // the row the write would commit
	valueText          string
	policy             string
	threshold          float64 // conflict threshold: a peer below it is not close
	duplicateThreshold float64
	peers              []peer // nearest first
}

// decide applies the rules in the order schemas/openapi.yaml gives memory.set's
// verdict: canonical-form match → merge; a close pinned peer → refused; under
// newest_wins a templated substitution → refines (or conflict when the peer's fact
// starts later); a near-identical statement → duplicate; any other close peer →
// conflict. A key-identified type (a decision) only ever conflicts, and no pin refuses
// it. append_only judges nothing.
func decide(in verdictInput) verdict {
	v := verdict{kind: VerdictNew}
	if in.policy == PolicyAppendOnly {
		return v
	}
	keyIdentified := memrow.KeyIdentifiedTypes[in.row.MemoryType]
	var close []peer
	for _, p := range in.peers {
		j := judgedPeer{MemoryID: p.row.MemoryID, MemoryKey: p.row.MemoryKey, Agent: p.row.Agent, UserID: p.row.UserID,
			SessionID: p.row.SessionID, Cosine: round4(p.cosine), Verdict: VerdictBelow}
		sameValue := p.row.ContentSHA256 == in.row.ContentSHA256
		switch {
		case p.cosine < in.threshold && (keyIdentified || !sameValue):
		case !sameSubject(p.row, in.row) && (!p.row.Pinned || sameValue):
			// Another user's fact is not this one: it neither absorbs the write nor is
			// flagged or retired by it; only a pin on a different value protects it.
			j.Verdict = VerdictOtherSubject
		default:
			close = append(close, p)
			j.Verdict = ""
		}
		v.judged = append(v.judged, j)
	}
	mark := func(p peer, kind Verdict) {
		for i := range v.judged {
			if v.judged[i].MemoryID == p.row.MemoryID && v.judged[i].MemoryKey == p.row.MemoryKey && v.judged[i].Verdict == "" {
				v.judged[i].Verdict = kind
			}
		}
	}
	// acted names the verdict's own peer; the other close peers are labelled
	// "close": they were within reach but another rule decided.
	acted := func(p peer, kind Verdict) verdict {
		mark(p, kind)
		for i := range v.judged {
			if v.judged[i].Verdict == "" {
				v.judged[i].Verdict = VerdictClose
			}
		}
		return verdict{kind: kind, target: p.row, judged: v.judged}
	}
	conflict := func() verdict {
		v.kind = VerdictConflict
		for _, p := range close {
			v.conflicts = append(v.conflicts, p.row)
			mark(p, VerdictConflict)
		}
		return v
	}
	if len(close) == 0 {
		return v
	}
	if keyIdentified {
		return conflict()
	}
	for _, p := range close {
		if p.row.ContentSHA256 == in.row.ContentSHA256 {
			return acted(p, VerdictMerge)
		}
	}
	for _, p := range close {
		if p.row.Pinned {
			return acted(p, VerdictPinned)
		}
	}
	peerText := func(p peer) string { return memrow.ValueText(p.row.Value) }
	if in.policy == PolicyNewestWins {
		for _, p := range close {
			if templatedSubstitution(in.valueText, peerText(p)) {
				if startsAfter(p.row, in.row) {
					break
				}
				return acted(p, VerdictRefines)
			}
		}
	}
	for _, p := range close {
		if p.cosine >= in.duplicateThreshold && sameContentWords(in.valueText, peerText(p)) && !valuesDiffer(in.valueText, peerText(p)) {
			return acted(p, VerdictDuplicate)
		}
	}
	return conflict()
}

// owesJudgement reports whether a write's row is marked judgement_owed for the
// conflict resolver by its verdict: a conflict, or, while the resolver is on (floor >
// 0), a peer of its subject at the resolver's floor (LOOM_MEMORY_CONFLICT_RESOLVER_
// MIN_SIMILARITY), however far below the conflict threshold. A proposal, a duplicate
// and a merge are not served facts, and owe nothing. The same key held by another
// session is markSameKey's (set_4_rows.go).
func owesJudgement(row *memrow.Row, v verdict, peers []peer, floor float64) bool {
	if row.Status == memrow.StatusProposed {
		return false
	}
	switch v.kind {
	case VerdictConflict:
		return true
	case VerdictNew:
	default:
		return false
	}
	if floor <= 0 {
		return false
	}
	for _, p := range peers {
		if p.cosine >= floor && !p.row.Pinned && sameSubject(p.row, row) {
			return true
		}
	}
	return false
}

// anonymous reports whether a user_id is the anonymous user's.
func anonymous(userID string) bool { return userID == memrow.DefaultIdentity || userID == "" }

// sameSubject reports whether two rows state facts of one subject, the seeds'
// subject of a row (memory-architecture.md, "A row's peers are its subject"): the
// same user_id, and for the anonymous user ("-", or a user_id sent empty) the same
// agent too. A merge, a duplicate, a refinement or a conflict relates two statements of
// one subject's fact; between two subjects it would fold one user's write into
// another's row (a write answered merged, then 404 at its own key) or flag and retire
// their facts against each other. It is also the scope of the resolver's cluster and of
// what one prompt may hold.
func sameSubject(a, b *memrow.Row) bool {
	if a.UserID != b.UserID {
		return false
	}
	return !anonymous(a.UserID) || a.Agent == b.Agent
}

// startsAfter reports whether the peer's fact is dated later than the row's: a newer
// statement cannot retire it.
func startsAfter(peerRow, row *memrow.Row) bool {
	if peerRow.ValidAt == nil {
		return false
	}
	at := row.UpdatedAt
	if row.ValidAt != nil {
		at = *row.ValidAt
	}
	if at.IsZero() {
		at = time.Now()
	}
	return peerRow.ValidAt.After(at)
}

func round4(f float64) float64 { return float64(int64(f*10000+0.5)) / 10000 }

// sameContentWords: one statement's meaningful words are all in the other's.
func sameContentWords(a, b string) bool {
	pa, _ := text.ContentWords(a)
	pb, _ := text.ContentWords(b)
	return text.Subset(pa, pb) || text.Subset(pb, pa)
}

// valuesDiffer: each side states a value the other lacks ("due on the 3rd" and "due
// on the 5th" are not duplicates, however close their vectors).
func valuesDiffer(a, b string) bool {
	_, va := text.ContentWords(a)
	_, vb := text.ContentWords(b)
	return !text.Subset(va, vb) && !text.Subset(vb, va)
}

package query

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/loomplane/loom/internal/communities"
	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/retrieval"
	"github.com/loomplane/loom/internal/text"
)

// memory.search's evidence legs (seeds, memory.search step 5: the verbatim-chunks leg
// with neighbour windows, and the summary legs over session_summaries and the entity
// summaries). The turns and digests legs read the conversation's record from the
// authority (internal/evidence), not the projections:
//   - turns: the query's words matched against the scope's recent verbatim chunks
//     (loom.memory_chunks), each hit answered with its neighbour window of turns;
//   - digests: the query's words matched against the newest digest of each of the
//     scope's sessions (loom.session_summaries);
//   - entities: the communities of the entities the query names, as the
//     entity_communities pass last found them (loom.entity_communities), each one's
//     summary the entities named together with them. The seeds' entity_communities
//     pass calls no model, so the summary is the community itself; it spans the
//     namespace's users, so a search narrowed to a user, session or agent (a token
//     bound to one user is) does not run it, as the entity read shows no community
//     to such a token.
//
// Their hits are not memories: a chunk, a digest or a community has no key, version or
// status, and the memory hits' verdict, gates and ranking read memory rows alone. The
// seeds name the legs but not how their hits are served, so they are served apart, in
// the answer's evidence section, each citing what it shows (c:<chunk>, with its turn
// ids, s:<session> or e:<community>), fused with each other by reciprocal rank; the
// memory hits are ranked as before. Which legs run is the settings' evidence_legs (all
// of them unless a layer names fewer); turns and digests are off when the scope keeps
// no turn (a digest is cut from turns), and the explain block says which ran and what
// each found.

// Legs of the evidence section.
const (
	legTurns    = retrieval.EvidenceTurns
	legDigests  = retrieval.EvidenceDigests
	legEntities = retrieval.EvidenceEntities
)

// Bounds of the evidence legs.
const (
	// evidenceScanChunks and evidenceScanDigests are how many of a namespace's most
	// recent chunks and session digests a query is matched against.
	evidenceScanChunks  = 1000
	evidenceScanDigests = 500
	// evidenceWindow is how many turns either side of a chunk its window holds.
	evidenceWindow = 2
	// evidenceRRFK is reciprocal rank fusion's k.
	evidenceRRFK = 60
	// evidenceBudget bounds the evidence legs: past it, or on a failed read, the page
	// is served without evidence and the explain block says why (fail-open, as the
	// seeds' side legs are: the memory hits never wait on or fail for them).
	evidenceBudget = time.Second
)

// evidenceHit is one hit of the evidence section: a verbatim chunk of a conversation
// with its neighbour window, a session's digest, or an entity summary.
type evidenceHit struct {
	Kind       string             `json:"kind"` // chunk, digest or entity_summary
	Cite       string             `json:"cite"` // c:<chunk id>, s:<session id> or e:<community>
	Namespace  string             `json:"namespace"`
	ChunkID    string             `json:"chunk_id,omitempty"`
	TurnIDs    []string           `json:"turn_ids,omitempty"` // the turns the chunk was cut from, in order
	Agent      string             `json:"agent,omitempty"`
	UserID     string             `json:"user_id"`
	SessionID  string             `json:"session_id"`
	FirstIndex int                `json:"first_index"` // the message indexes the hit covers
	LastIndex  int                `json:"last_index"`
	OccurredAt time.Time          `json:"occurred_at"`
	Text       string             `json:"text"`
	Score      float64            `json:"score"`
	Scores     map[string]float64 `json:"scores"`
	Window     []Turn             `json:"window,omitempty"` // the session's turns around a chunk, its own included, oldest first
	// An entity summary's community: its label, size, members (at most
	// maxCommunityMembers, by name) and which of them the query named.
	Community string   `json:"community,omitempty"`
	Size      int      `json:"size,omitempty"`
	Members   []string `json:"members,omitempty"`
	Named     []string `json:"named,omitempty"`
}

// evidenceLeg is what one evidence leg did, for the explain block.
type evidenceLeg struct {
	Leg     string `json:"leg"`
	Ran     bool   `json:"ran"`
	Note    string `json:"note,omitempty"`
	Scanned int    `json:"scanned"` // candidates matched against the query
	Matched int    `json:"matched"` // candidates sharing a word with it
	Served  int    `json:"served"`  // hits served on the page
}

// evidenceRun is the evidence legs' result.
type evidenceRun struct {
	hits []evidenceHit
	legs []evidenceLeg
}

// evidenceOff is the explain block of evidence legs that did not run, each with note.
func evidenceOff(note string) []evidenceLeg {
	out := make([]evidenceLeg, 0, len(retrieval.EvidenceLegs()))
	for _, leg := range retrieval.EvidenceLegs() {
		out = append(out, evidenceLeg{Leg: leg, Note: note})
	}
	return out
}

// Notes of an evidence leg that did not run.
const (
	noteNotAsked = "not asked (evidence_legs)"
	noteNoTurns  = "the scope keeps no turns"
	noteNarrowed = "the search is narrowed to a user, session or agent; a community spans the namespace's"
)

// evidenceLegsOn are the evidence legs that run, and the note of each that does not.
func (p *searchPlan) evidenceLegsOn() map[string]string {
	off := map[string]string{}
	for _, leg := range retrieval.EvidenceLegs() {
		switch {
		case !slices.Contains(p.settings.EvidenceLegs, leg):
			off[leg] = noteNotAsked
		case leg != legEntities && !p.hasTurns:
			off[leg] = noteNoTurns
		case leg == legEntities && (p.f.userID != "" || p.f.sessionID != "" || p.f.agent != ""):
			off[leg] = noteNarrowed
		}
	}
	return off
}

// runEvidence runs the evidence legs over the plan's namespaces within
// evidenceBudget and fuses them, at most topK hits. A failed or late read serves no
// evidence and says so.
func (s *Service) runEvidence(ctx context.Context, plan *searchPlan) *evidenceRun {
	ctx, cancel := context.WithTimeout(ctx, evidenceBudget)
	defer cancel()
	run, err := s.evidenceLegs(ctx, plan, plan.evidenceLegsOn())
	if err != nil {
		note := "failed, no evidence served: " + err.Error()
		if ctx.Err() != nil {
			note = fmt.Sprintf("not done within %v, no evidence served", evidenceBudget)
		}
		s.log.Warn("the search's evidence legs failed", "err", err)
		return &evidenceRun{hits: []evidenceHit{}, legs: evidenceOff(note)}
	}
	return run
}

// unwrapKey opens a stored data key: a raw one as it is, a wrapped one with the ring.
func (s *Service) unwrapKey(stored []byte) ([]byte, error) {
	if kek.Raw(stored) {
		return stored, nil
	}
	if s.kek == nil {
		return nil, errors.New("a data key is wrapped and the read side holds no KEK")
	}
	return s.kek.Unwrap(stored)
}

// evidenceLegs runs the evidence legs not in off (a leg's note when it does not run).
func (s *Service) evidenceLegs(ctx context.Context, plan *searchPlan, off map[string]string) (*evidenceRun, error) {
	terms := map[string]bool{}
	for _, t := range text.Terms(plan.req.Query) {
		terms[t] = true
	}
	accounts := map[string]*evidenceLeg{}
	found := map[string][]evidenceHit{}
	for _, leg := range retrieval.EvidenceLegs() {
		note, skip := off[leg]
		accounts[leg] = &evidenceLeg{Leg: leg, Ran: !skip, Note: note}
	}
	var names []string
	if accounts[legEntities].Ran {
		names = plan.graphNames()
	}
	for _, ns := range plan.namespaces {
		scope := evidence.Scope{Org: plan.f.org, Namespace: ns, UserID: plan.f.userID}
		if accounts[legTurns].Ran {
			hits, scanned, err := s.chunkHits(ctx, plan, scope, terms)
			if err != nil {
				return nil, err
			}
			found[legTurns], accounts[legTurns].Scanned = append(found[legTurns], hits...), accounts[legTurns].Scanned+scanned
		}
		if accounts[legDigests].Ran {
			hits, scanned, err := s.digestHits(ctx, plan, scope, terms)
			if err != nil {
				return nil, err
			}
			found[legDigests], accounts[legDigests].Scanned = append(found[legDigests], hits...), accounts[legDigests].Scanned+scanned
		}
		if accounts[legEntities].Ran {
			hits, scanned, err := s.entitySummaryHits(ctx, plan.f.org, ns, names, terms)
			if err != nil {
				return nil, err
			}
			found[legEntities], accounts[legEntities].Scanned = append(found[legEntities], hits...), accounts[legEntities].Scanned+scanned
		}
	}
	for leg, a := range accounts {
		a.Matched = len(found[leg])
	}
	if d := accounts[legDigests]; d.Ran && d.Scanned == 0 {
		d.Note = "no session of the scope has a digest yet"
	}
	if e := accounts[legEntities]; e.Ran && e.Scanned == 0 {
		e.Note = "no entity the query names is in a community yet"
	}
	hits := fuseEvidence(found, plan.req.TopK)
	if err := s.chunkWindows(ctx, plan, hits); err != nil {
		return nil, err
	}
	for _, h := range hits {
		accounts[legOfKind[h.Kind]].Served++
	}
	legs := make([]evidenceLeg, 0, len(accounts))
	for _, leg := range retrieval.EvidenceLegs() {
		legs = append(legs, *accounts[leg])
	}
	return &evidenceRun{hits: hits, legs: legs}, nil
}

// legOfKind is the evidence leg that finds each kind of hit.
var legOfKind = map[string]string{"chunk": legTurns, "digest": legDigests, "entity_summary": legEntities}

// matchedHits keeps the items in reach, scores their text against the query's terms,
// and makes a hit of each that shares a word with it: the hits, and how many items were
// matched.
func matchedHits[T any](items []T, terms map[string]bool, reaches func(T) bool, text func(T) string, hit func(T, float64) evidenceHit) ([]evidenceHit, int) {
	var kept []T
	var docs []string
	for _, it := range items {
		if reaches(it) {
			kept = append(kept, it)
			docs = append(docs, text(it))
		}
	}
	var hits []evidenceHit
	for i, sc := range lexicalScores(terms, docs) {
		if sc > 0 {
			hits = append(hits, hit(kept[i], round6(sc)))
		}
	}
	return hits, len(kept)
}

// chunkHits matches the query's terms against the scope's recent chunks in the plan's
// filter: the hits, and how many chunks were matched.
func (s *Service) chunkHits(ctx context.Context, plan *searchPlan, scope evidence.Scope, terms map[string]bool) ([]evidenceHit, int, error) {
	chunks, err := evidence.RecentChunks(ctx, s.pool, scope, evidenceScanChunks, s.unwrapKey)
	if err != nil {
		return nil, 0, err
	}
	hits, n := matchedHits(chunks, terms, func(c evidence.OpenedChunk) bool { return plan.evidenceReaches(c.Agent, c.SessionID) },
		func(c evidence.OpenedChunk) string { return c.Text },
		func(c evidence.OpenedChunk, sc float64) evidenceHit {
			return evidenceHit{Kind: "chunk", Cite: "c:" + c.ChunkID, Namespace: scope.Namespace, ChunkID: c.ChunkID,
				Agent: c.Agent, UserID: c.UserID, SessionID: c.SessionID, FirstIndex: c.FirstIndex,
				LastIndex: c.LastIndex, OccurredAt: c.OccurredAt.UTC(), Text: c.Text, Scores: map[string]float64{legTurns: sc}}
		})
	return hits, n, nil
}

// digestHits matches the query's terms against the newest digest of each of the
// scope's sessions in the plan's filter: the hits, and how many digests were matched.
func (s *Service) digestHits(ctx context.Context, plan *searchPlan, scope evidence.Scope, terms map[string]bool) ([]evidenceHit, int, error) {
	ds, err := evidence.NewestDigests(ctx, s.pool, scope, evidenceScanDigests, s.unwrapKey)
	if err != nil {
		return nil, 0, err
	}
	hits, n := matchedHits(ds, terms, func(d evidence.OpenedDigest) bool { return plan.evidenceReaches("", d.SessionID) },
		func(d evidence.OpenedDigest) string { return d.Text },
		func(d evidence.OpenedDigest, sc float64) evidenceHit {
			return evidenceHit{Kind: "digest", Cite: "s:" + d.SessionID, Namespace: scope.Namespace, UserID: d.UserID,
				SessionID: d.SessionID, LastIndex: d.WindowEnd, OccurredAt: d.CreatedAt.UTC(), Text: d.Text,
				Scores: map[string]float64{legDigests: sc}}
		})
	return hits, n, nil
}

// entitySummaryHits reads the communities of namespace ns holding an entity the query
// names and matches the query's terms against each one's summary: the hits, and how
// many communities were matched.
func (s *Service) entitySummaryHits(ctx context.Context, org, ns string, names []string, terms map[string]bool) ([]evidenceHit, int, error) {
	sums, err := communities.Summaries(ctx, s.pool, org, ns, names, maxCommunityMembers)
	if err != nil {
		return nil, 0, err
	}
	hits, n := matchedHits(sums, terms, func(communities.Summary) bool { return true }, entitySummaryText,
		func(c communities.Summary, sc float64) evidenceHit {
			return evidenceHit{Kind: "entity_summary", Cite: "e:" + c.ID, Namespace: ns, OccurredAt: c.ComputedAt,
				Text: entitySummaryText(c), Community: c.ID, Size: c.Size, Members: c.Members, Named: c.Named,
				Scores: map[string]float64{legEntities: sc}}
		})
	return hits, n, nil
}

// entitySummaryText is a community's summary: the entities named together, and how
// many there are when the members listed are fewer.
func entitySummaryText(c communities.Summary) string {
	out := "Named together: " + strings.Join(c.Members, ", ")
	if c.Size > len(c.Members) {
		out += fmt.Sprintf(" and %d more", c.Size-len(c.Members))
	}
	return out + "."
}

// chunkWindows is the evidence legs' stage 2, keyed by the served chunks: their
// lineage and their neighbour windows.
func (s *Service) chunkWindows(ctx context.Context, plan *searchPlan, hits []evidenceHit) error {
	served := map[string][]string{}
	for _, h := range hits {
		if h.Kind == "chunk" {
			served[h.Namespace] = append(served[h.Namespace], h.ChunkID)
		}
	}
	lineage := map[string][]string{}
	for ns, ids := range served {
		by, err := evidence.ChunkTurns(ctx, s.pool, plan.f.org, ns, ids)
		if err != nil {
			return err
		}
		for id, turns := range by {
			lineage[id] = turns
		}
	}
	for i := range hits {
		h := &hits[i]
		if h.Kind != "chunk" {
			continue
		}
		h.TurnIDs = lineage[h.ChunkID]
		near, err := evidence.Window(ctx, s.pool, evidence.Scope{Org: plan.f.org, Namespace: h.Namespace, UserID: h.UserID},
			h.SessionID, h.FirstIndex-evidenceWindow, h.LastIndex+evidenceWindow)
		if err != nil {
			return err
		}
		h.Window = make([]Turn, len(near))
		for j, o := range near {
			h.Window[j] = turnOf(o)
		}
	}
	return nil
}

// evidenceReaches is whether a chunk or digest of agent and session is in the
// search's filter: its agent and session when it names them (a token bound to one
// session names it).
func (p *searchPlan) evidenceReaches(agent, session string) bool {
	if p.f.sessionID == noUser {
		return false
	}
	if p.f.sessionID != "" && p.f.sessionID != memrow.DefaultIdentity && session != p.f.sessionID {
		return false
	}
	return agent == "" || p.f.agent == "" || agent == p.f.agent
}

// lexicalScores scores docs against a query's terms by the terms each shares with
// it, each weighted by its rarity among docs (BM25's idf), as memory.recall scores
// turns; 0 shares none. A word is stemmed once a call (text.Terms' rule, its stems
// kept by word): stemming every word of a thousand chunks is most of the leg's time,
// and a conversation repeats its words.
func lexicalScores(terms map[string]bool, docs []string) []float64 {
	has := make([]map[string]bool, len(docs))
	df := map[string]int{}
	stems := map[string]string{}
	for i, d := range docs {
		has[i] = map[string]bool{}
		for _, w := range text.Words(d) {
			t, ok := stems[w]
			if !ok {
				if !text.Stopword(w) {
					t = text.Stem(w)
				}
				stems[w] = t
			}
			if t != "" && terms[t] && !has[i][t] {
				has[i][t] = true
				df[t]++
			}
		}
	}
	n := float64(len(docs))
	out := make([]float64, len(docs))
	for i := range docs {
		for t := range has[i] {
			out[i] += math.Log(1 + (n-float64(df[t])+0.5)/(float64(df[t])+0.5))
		}
	}
	return out
}

// fuseEvidence ranks each leg's hits by score (newest first on a tie), fuses the legs
// by reciprocal rank and answers the best topK; a hit's score is its fused score.
func fuseEvidence(legs map[string][]evidenceHit, topK int) []evidenceHit {
	var all []evidenceHit
	for _, leg := range retrieval.EvidenceLegs() {
		hits := legs[leg]
		sort.SliceStable(hits, func(a, b int) bool {
			if hits[a].Scores[leg] != hits[b].Scores[leg] {
				return hits[a].Scores[leg] > hits[b].Scores[leg]
			}
			return hits[a].OccurredAt.After(hits[b].OccurredAt)
		})
		for rank := range hits {
			h := hits[rank]
			h.Score = round6(1 / float64(evidenceRRFK+rank+1))
			h.Scores["fused"] = h.Score
			all = append(all, h)
		}
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].Score > all[b].Score })
	if len(all) > topK {
		all = all[:topK]
	}
	if all == nil {
		all = []evidenceHit{}
	}
	return all
}

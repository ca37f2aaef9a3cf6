package query

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// A kept trace is read back as the authority stands now (postgres-authority:
// memory.search_trace waits at a search's barrier and, outside an as_of replay, leaves
// out the candidates the authority no longer serves and counts them in its
// stale_dropped, with no refill). The trace keeps what the search did; the read drops
// from its legs, fusion and served lists every memory whose head is no longer served
// (deleted, expired, retired, made unsearchable, or of a type the search hides) and says
// how many it dropped.

// traceLists are the trace's lists of candidates, each entry naming its memory by "id".
var traceLists = []string{"fusion", "served"}

// recheckTrace filters the trace's candidates by the authority's heads. An as_of
// search's trace replays history and is left as it is. A head of a type the search
// hides (memrow.HiddenTypes, a reflection, when the search did not name its type) is
// left out as search would leave it out now, from the validation drops too: a row
// revised into a reflection since the search is no longer served to it.
func (s *Service) recheckTrace(ctx context.Context, org string, namespaces []string, raw json.RawMessage) (json.RawMessage, int, error) {
	var t map[string]any
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, 0, fmt.Errorf("decode the kept trace: %w", err)
	}
	if t["as_of"] != nil {
		return raw, 0, nil
	}
	if _, err := s.barrier.Wait(ctx, org, namespaces); err != nil {
		return nil, 0, err
	}
	legs, _ := t["legs"].([]any)
	drops, _ := t["validation_drops"].([]any)
	lists := [][]any{drops}
	for _, l := range legs {
		if lm, ok := l.(map[string]any); ok {
			hits, _ := lm["hits"].([]any)
			lists = append(lists, hits)
		}
	}
	for _, name := range traceLists {
		list, _ := t[name].([]any)
		lists = append(lists, list)
	}
	ids := map[memrow.Identity]bool{}
	for _, list := range lists {
		for _, e := range list {
			if id, ok := entryIdentity(e); ok {
				ids[id] = true
			}
		}
	}
	asked, _ := t["memory_type"].(string)
	served, hidden, err := s.servedNow(ctx, org, ids, filter{memoryType: asked})
	if err != nil {
		return nil, 0, httperr.Store("reading the heads the trace names", err)
	}
	dropped := map[memrow.Identity]bool{}
	keep := func(list []any, out func(memrow.Identity) bool, count bool) []any {
		kept := []any{}
		for _, e := range list {
			if id, ok := entryIdentity(e); ok && out(id) {
				if count {
					dropped[id] = true
				}
				continue
			}
			kept = append(kept, e)
		}
		return kept
	}
	unserved := func(id memrow.Identity) bool { return !served[id] }
	for _, l := range legs {
		if lm, ok := l.(map[string]any); ok {
			hits, _ := lm["hits"].([]any)
			lm["hits"] = keep(hits, unserved, true)
		}
	}
	for _, name := range traceLists {
		if list, ok := t[name].([]any); ok {
			t[name] = keep(list, unserved, true)
		}
	}
	if drops != nil {
		t["validation_drops"] = keep(drops, func(id memrow.Identity) bool { return hidden[id] }, false)
	}
	out, err := json.Marshal(t)
	return out, len(dropped), err
}

// entryIdentity is the memory a trace entry names by "id".
func entryIdentity(e any) (memrow.Identity, bool) {
	m, ok := e.(map[string]any)
	if !ok {
		return memrow.Identity{}, false
	}
	return identityOf(m["id"])
}

// servedNow reports, for each identity, whether search serves its head now to a
// search narrowed by f's memory type, and whether f hides the head's type.
func (s *Service) servedNow(ctx context.Context, org string, ids map[memrow.Identity]bool, f filter) (served, hidden map[memrow.Identity]bool, err error) {
	byNS := map[string][]memrow.Identity{}
	for id := range ids {
		byNS[id.Namespace] = append(byNS[id.Namespace], id)
	}
	now := s.now()
	served, hidden = map[memrow.Identity]bool{}, map[memrow.Identity]bool{}
	for ns, list := range byNS {
		withOrg := make([]memrow.Identity, len(list))
		for i, id := range list {
			withOrg[i] = id
			withOrg[i].Org = org
		}
		hs, err := heads.Many(ctx, s.pool, org, ns, withOrg)
		if err != nil {
			return nil, nil, err
		}
		for _, id := range list {
			h := hs[heads.IdentityKey(id)]
			hidden[id] = h != nil && f.hides(h.MemoryType)
			served[id] = h != nil && h.Served(now) && !hidden[id]
		}
	}
	return served, hidden, nil
}

// identityOf reads a trace entry's "id" (org left out, as the trace keeps it).
func identityOf(v any) (memrow.Identity, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return memrow.Identity{}, false
	}
	str := func(k string) string { s, _ := m[k].(string); return s }
	id := memrow.Identity{Namespace: str("namespace"), Agent: str("agent"), UserID: str("user_id"), SessionID: str("session_id"), MemoryKey: str("memory_key")}
	return id, id.Namespace != "" && id.MemoryKey != ""
}

package mem0

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/loomplane/loom/client"
)

// searchRequest is the body of POST /v3/memories/search/ as MemoryClient.search sends
// it. Entity ids at the top level are read as filters.
type searchRequest struct {
	Query   string         `json:"query"`
	Filters map[string]any `json:"filters"`
	entities
	TopK       json.Number    `json:"top_k"`
	Threshold  json.Number    `json:"threshold"`
	Metadata   map[string]any `json:"metadata"`
	Categories []string       `json:"categories"`
	searchIgnored
}

// filters is the request's filters with its top-level entity ids, metadata and
// categories folded in.
func withTopLevel(filters map[string]any, e entities, metadata map[string]any, categories []string) map[string]any {
	out := map[string]any{}
	for k, v := range filters {
		out[k] = v
	}
	for k, v := range map[string]string{"user_id": e.UserID, "agent_id": e.AgentID, "app_id": e.AppID, "run_id": e.RunID} {
		if _, set := out[k]; v != "" && !set {
			out[k] = v
		}
	}
	var and []any
	if len(metadata) > 0 {
		and = append(and, map[string]any{"metadata": metadata})
	}
	if len(categories) > 0 {
		in := make([]any, len(categories))
		for i, c := range categories {
			in[i] = c
		}
		and = append(and, map[string]any{"categories": map[string]any{"in": in}})
	}
	if len(and) > 0 {
		if prev, ok := out["AND"].([]any); ok {
			and = append(prev, and...)
		}
		out["AND"] = and
	}
	return out
}

// searchAnswer is mem0's search answer, with Loom's verdict beside it.
type searchAnswer struct {
	Results []record      `json:"results"`
	Loom    searchVerdict `json:"loom"`
}

type searchVerdict struct {
	Verdict      string `json:"verdict"`
	StaleDropped int    `json:"stale_dropped"`
	Mode         string `json:"mode"`
}

// search is memory.search narrowed by the filters' entity ids; the rest of the filter
// is checked on the hits, so Loom is asked for more hits than top_k when it has any.
// threshold drops hits whose relevance (Loom's absolute evidence, its abstain gate's
// input) is below it.
func (f *facade) search(ctx context.Context, c *call) (any, error) {
	var req searchRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.Query == "" {
		return nil, badRequest("query: required")
	}
	p, err := compile(withTopLevel(req.Filters, req.entities, req.Metadata, req.Categories))
	if err != nil {
		return nil, err
	}
	topK, err := positive("top_k", req.TopK, 10)
	if err != nil {
		return nil, err
	}
	if err := checkEntities(p.entities); err != nil {
		return nil, err
	}
	ns, err := f.namespaceOf(p.AppID)
	if err != nil {
		return nil, err
	}
	ask := topK
	if p.narrowsBeyondIdentity() {
		ask = min(100, topK*4)
	}
	sr := client.SearchRequest{Query: req.Query, TopK: min(ask, 100), Agent: p.AgentID, UserID: p.UserID, SessionID: p.RunID}
	p.provenance.narrow(&sr)
	a, err := c.loom.Search(ctx, ns, sr)
	if err != nil {
		return nil, err
	}
	var threshold float64
	if req.Threshold != "" {
		if threshold, err = req.Threshold.Float64(); err != nil {
			return nil, badRequest("threshold: want a number")
		}
	}
	out := searchAnswer{Results: []record{}, Loom: searchVerdict{Verdict: a.Verdict, StaleDropped: a.StaleDropped, Mode: a.Mode}}
	for i := range a.Hits {
		h := &a.Hits[i]
		if h.Scores.Relevance < threshold {
			continue
		}
		r := f.record(&h.Memory)
		if !p.check.match(&r) {
			continue
		}
		r.Score, r.Loom.Relevance = &h.Score, &h.Scores.Relevance
		out.Results = append(out.Results, r)
		if len(out.Results) == topK {
			break
		}
	}
	if len(out.Results) == 0 {
		out.Loom.Verdict = client.VerdictNoMatch
	}
	return out, nil
}

// narrowsBeyondIdentity reports whether the filter checks more than Loom narrowed by.
func (p plan) narrowsBeyondIdentity() bool {
	pushed := map[string]string{"user_id": p.UserID, "agent_id": p.AgentID, "app_id": p.AppID, "run_id": p.RunID}
	for _, c := range flatten(p.check) {
		cd, ok := c.(cond)
		if ok && p.provenance.pushed(cd) {
			continue
		}
		if !ok || cd.op != "eq" || pushed[cd.field] == "" || cd.arg != pushed[cd.field] {
			return true
		}
	}
	return false
}

func flatten(p predicate) []predicate {
	switch v := p.(type) {
	case allOf:
		var out []predicate
		for _, q := range v {
			out = append(out, flatten(q)...)
		}
		return out
	default:
		return []predicate{p}
	}
}

func positive(name string, n json.Number, def int) (int, error) {
	if n == "" {
		return def, nil
	}
	v, err := strconv.Atoi(string(n))
	if err != nil || v < 1 {
		return 0, badRequest("%s: want a positive whole number", name)
	}
	return v, nil
}

// listRequest is the body of POST /v3/memories/ as MemoryClient.getAll sends it.
type listRequest struct {
	Filters map[string]any `json:"filters"`
	entities
	StartDate  string   `json:"start_date"`
	EndDate    string   `json:"end_date"`
	Categories []string `json:"categories"`
	listIgnored
}

// listAnswer is mem0's paginated envelope.
type listAnswer struct {
	Count    int      `json:"count"`
	Next     *string  `json:"next"`
	Previous *string  `json:"previous"`
	Results  []record `json:"results"`
}

// listScanMax bounds the memories a list reads to count its matches.
const listScanMax = 50_000

// list is memory.list narrowed by the filters' entity ids, newest first, every page of
// it read and checked against the rest of the filter: mem0's answer counts the matches.
func (f *facade) list(ctx context.Context, c *call) (any, error) {
	var req listRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	filters := withTopLevel(req.Filters, req.entities, nil, req.Categories)
	for op, d := range map[string]string{"gte": req.StartDate, "lte": req.EndDate} {
		if d != "" {
			filters["AND"] = append(anyList(filters["AND"]), map[string]any{"created_at": map[string]any{op: d}})
		}
	}
	p, err := compile(filters)
	if err != nil {
		return nil, err
	}
	q := c.r.URL.Query()
	page, err := positive("page", json.Number(q.Get("page")), 1)
	if err != nil {
		return nil, err
	}
	size, err := positive("page_size", json.Number(q.Get("page_size")), 100)
	if err != nil {
		return nil, err
	}
	if err := checkEntities(p.entities); err != nil {
		return nil, err
	}
	ns, err := f.namespaceOf(p.AppID)
	if err != nil {
		return nil, err
	}
	var matched []record
	o := client.ListOptions{Limit: 500, Identity: p.identity()}
	for scanned := 0; ; {
		a, err := c.loom.List(ctx, ns, o)
		if err != nil {
			return nil, err
		}
		for i := range a.Memories {
			if r := f.record(&a.Memories[i]); p.check.match(&r) {
				matched = append(matched, r)
			}
		}
		if scanned += len(a.Memories); a.NextPageToken == "" {
			break
		} else if scanned >= listScanMax {
			return nil, badRequest("the filter matches within more than %d memories: narrow it by user_id, agent_id, run_id or app_id", listScanMax)
		}
		o.PageToken = a.NextPageToken
	}
	out := listAnswer{Count: len(matched), Results: []record{}}
	if from := (page - 1) * size; from < len(matched) {
		out.Results = matched[from:min(from+size, len(matched))]
	}
	if page*size < len(matched) {
		out.Next = pageURL(c, page+1, size)
	}
	if page > 1 {
		out.Previous = pageURL(c, page-1, size)
	}
	return out, nil
}

func anyList(v any) []any {
	l, _ := v.([]any)
	return l
}

// pageURL is the request's own URL at another page, as mem0 links pages.
func pageURL(c *call, page, size int) *string {
	u, err := url.Parse(c.r.RequestURI)
	if err != nil {
		return nil
	}
	q := u.Query()
	q.Set("page", strconv.Itoa(page))
	q.Set("page_size", strconv.Itoa(size))
	u.RawQuery = q.Encode()
	scheme := "http"
	if c.r.TLS != nil {
		scheme = "https"
	}
	s := scheme + "://" + c.r.Host + u.RequestURI()
	return &s
}

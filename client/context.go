package client

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// What an agent reads before it answers: context.pack and memory.stack, and the reads
// memory.timeline, memory.related, memory.aggregate and memory.statuses.

// PackRequest asks for a context block; nil numbers take the server's defaults.
type PackRequest struct {
	Query        string   `json:"query,omitempty"`
	Agent        string   `json:"agent,omitempty"`
	UserID       string   `json:"user_id,omitempty"`
	SessionID    string   `json:"session_id,omitempty"`
	BudgetTokens *int     `json:"budget_tokens,omitempty"`
	Tokenizer    string   `json:"tokenizer,omitempty"`
	Model        string   `json:"model,omitempty"`
	Sections     []string `json:"sections,omitempty"`
	Format       string   `json:"format,omitempty"` // markdown (default) or json
	PerKey       *int     `json:"per_key,omitempty"`
	PerSession   *int     `json:"per_session,omitempty"`
	TopK         *int     `json:"top_k,omitempty"`
	Recent       *int     `json:"recent,omitempty"`
	LastTurns    *int     `json:"last_turns,omitempty"`
}

// PackTokenizer is the encoding a pack's budget was counted with.
type PackTokenizer struct {
	Encoding    string `json:"encoding"`
	Approximate bool   `json:"approximate"`
}

// PackLine is one cited line of a layer; Source is memory.stack's record of it.
type PackLine struct {
	Cite   string          `json:"cite"`
	Text   string          `json:"text"`
	Tokens int             `json:"tokens"`
	Source json.RawMessage `json:"source,omitempty"`
}

// PackSection is one layer.
type PackSection struct {
	Name      string     `json:"name"`
	Available bool       `json:"available"`
	Note      string     `json:"note,omitempty"`
	Lines     []PackLine `json:"lines"`
}

// PackCut is a line a pack left out, and why (budget, per_key, per_session, duplicate).
type PackCut struct {
	Section string `json:"section"`
	Cite    string `json:"cite"`
	Reason  string `json:"reason"`
	Tokens  int    `json:"tokens"`
}

// PackAnswer is context.pack's answer: Block goes into the prompt.
type PackAnswer struct {
	Namespace string        `json:"namespace"`
	Format    string        `json:"format"`
	Block     string        `json:"block"`
	Tokens    int           `json:"tokens"`
	Budget    int           `json:"budget_tokens"`
	Tokenizer PackTokenizer `json:"tokenizer"`
	Priority  []string      `json:"priority"`
	Sections  []PackSection `json:"sections"`
	Cut       []PackCut     `json:"cut"`
	// Citations are every citation the block holds, each once, in the block's order.
	Citations []string `json:"citations"`
	Barrier   Barrier  `json:"barrier"`
}

// StackAnswer is memory.stack's answer: the layers, no block.
type StackAnswer struct {
	Namespace string        `json:"namespace"`
	Tokens    int           `json:"tokens"`
	Budget    int           `json:"budget_tokens"`
	Tokenizer PackTokenizer `json:"tokenizer"`
	Priority  []string      `json:"priority"`
	Sections  []PackSection `json:"sections"`
	Cut       []PackCut     `json:"cut"`
	Barrier   Barrier       `json:"barrier"`
}

// Pack builds a context block for a system prompt (context.pack).
func (c *Client) Pack(ctx context.Context, ns string, req PackRequest) (*PackAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/context:pack", nil)
	k.body = req
	var a PackAnswer
	return &a, c.into(ctx, k, &a)
}

// Stack answers a pack's layers as structured JSON (memory.stack).
func (c *Client) Stack(ctx context.Context, ns string, req PackRequest) (*StackAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/context:stack", nil)
	k.body = req
	var a StackAnswer
	return &a, c.into(ctx, k, &a)
}

// TimelineQuery names a timeline: a key (with Identity), an entity, or neither (the
// scope's newest facts); Limit 0 is the server's default.
type TimelineQuery struct {
	Identity
	Key    string
	Entity string
	Limit  int
}

// TimelineEntry is one version of a fact in valid time.
type TimelineEntry struct {
	Cite         string          `json:"cite"`
	MemoryKey    string          `json:"memory_key"`
	Agent        string          `json:"agent"`
	UserID       string          `json:"user_id"`
	SessionID    string          `json:"session_id"`
	MemoryID     string          `json:"memory_id"`
	Version      int64           `json:"version"`
	VersionText  string          `json:"version_text"`
	Event        string          `json:"event"`
	Status       string          `json:"status"`
	Tombstone    bool            `json:"tombstone"`
	Value        json.RawMessage `json:"value"`
	ValidFrom    time.Time       `json:"valid_from"`
	ValidTo      *time.Time      `json:"valid_to,omitempty"`
	SupersededBy string          `json:"superseded_by,omitempty"`
	Supersedes   []string        `json:"supersedes,omitempty"`
}

// TimelineAnswer is memory.timeline's answer.
type TimelineAnswer struct {
	Namespace string          `json:"namespace"`
	Entity    string          `json:"entity,omitempty"`
	MemoryKey string          `json:"memory_key,omitempty"`
	Keys      int             `json:"keys"`
	Entries   []TimelineEntry `json:"entries"`
}

// Timeline reads facts and their changes in valid-time order (memory.timeline).
func (c *Client) Timeline(ctx context.Context, ns string, q TimelineQuery) (*TimelineAnswer, error) {
	k := c.newCall(http.MethodGet, nsPath(ns)+"/timeline", nil)
	v := q.Identity.query(nil)
	setNonEmpty(v, "key", q.Key)
	setNonEmpty(v, "entity", q.Entity)
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	k.query = v
	var a TimelineAnswer
	return &a, c.into(ctx, k, &a)
}

// RelatedMemory is a neighbour and how it is one (graph, vector, session).
type RelatedMemory struct {
	Memory
	Cite           string   `json:"cite"`
	Via            []string `json:"via"`
	SharedEntities []string `json:"shared_entities,omitempty"`
	Score          float64  `json:"score,omitempty"`
}

// RelatedAnswer is memory.related's answer.
type RelatedAnswer struct {
	Memory    Memory          `json:"memory"`
	Neighbors []RelatedMemory `json:"neighbors"`
}

// Related reads a memory's neighbours (memory.related); limit 0 is the default.
func (c *Client) Related(ctx context.Context, ns, key string, id Identity, limit int) (*RelatedAnswer, error) {
	k := c.newCall(http.MethodGet, keyPath(ns, key)+"/related", nil)
	k.query = id.query(nil)
	if limit > 0 {
		k.query.Set("limit", strconv.Itoa(limit))
	}
	var a RelatedAnswer
	return &a, c.into(ctx, k, &a)
}

// AggregateQuery names the dimensions (type, status, tag, entity, day; none: all)
// and the scope of memory.aggregate.
type AggregateQuery struct {
	Identity
	By    []string
	Limit int
}

// Bucket is one value of a dimension and how many live memories hold it.
type Bucket struct {
	Value string `json:"value"`
	Count int64  `json:"count"`
}

// AggregateAnswer is memory.aggregate's answer.
type AggregateAnswer struct {
	Namespace string              `json:"namespace"`
	Total     int64               `json:"total"`
	Truncated bool                `json:"truncated"`
	By        map[string][]Bucket `json:"by"`
}

// Aggregate counts live memories by dimension (memory.aggregate).
func (c *Client) Aggregate(ctx context.Context, ns string, q AggregateQuery) (*AggregateAnswer, error) {
	k := c.newCall(http.MethodGet, nsPath(ns)+"/memories:aggregate", nil)
	v := q.Identity.query(nil)
	for i, d := range q.By {
		if i == 0 {
			v.Set("by", d)
		} else {
			v.Set("by", v.Get("by")+","+d)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	k.query = v
	var a AggregateAnswer
	return &a, c.into(ctx, k, &a)
}

// KeyStatus is one key's standing: State is live, deleted, expired or missing.
type KeyStatus struct {
	BulkGetKey
	State        string   `json:"state"`
	Status       string   `json:"status,omitempty"`
	MemoryID     string   `json:"memory_id,omitempty"`
	Version      int64    `json:"version,omitempty"`
	VersionText  string   `json:"version_text,omitempty"`
	SupersededBy string   `json:"superseded_by,omitempty"`
	DuplicateOf  string   `json:"duplicate_of,omitempty"`
	ConflictWith []string `json:"conflict_with,omitempty"`
	Pinned       bool     `json:"pinned,omitempty"`
	Locked       bool     `json:"locked,omitempty"`
}

// Statuses reads a key set's statuses in one call (memory.statuses).
func (c *Client) Statuses(ctx context.Context, ns string, keys []BulkGetKey) ([]KeyStatus, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/memories:statuses", nil)
	k.body = map[string]any{"keys": keys}
	var a struct {
		Statuses []KeyStatus `json:"statuses"`
	}
	return a.Statuses, c.into(ctx, k, &a)
}

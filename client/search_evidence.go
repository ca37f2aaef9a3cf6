package client

import "time"

// SearchEvidence is a search's evidence section: hits that are not memories.
type SearchEvidence struct {
	Hits []EvidenceHit `json:"hits"`
}

// EvidenceHit is a verbatim chunk of a conversation (Kind "chunk", with its neighbour
// window of turns), a session's digest (Kind "digest") or an entity summary (Kind
// "entity_summary": a community of entities named together); Cite resolves it
// (c:<chunk id>, s:<session id> or e:<community>).
type EvidenceHit struct {
	Kind       string             `json:"kind"`
	Cite       string             `json:"cite"`
	Namespace  string             `json:"namespace"`
	ChunkID    string             `json:"chunk_id,omitempty"`
	TurnIDs    []string           `json:"turn_ids,omitempty"`
	Agent      string             `json:"agent,omitempty"`
	UserID     string             `json:"user_id"`
	SessionID  string             `json:"session_id"`
	FirstIndex int                `json:"first_index"`
	LastIndex  int                `json:"last_index"`
	OccurredAt time.Time          `json:"occurred_at"`
	Text       string             `json:"text"`
	Score      float64            `json:"score"`
	Scores     map[string]float64 `json:"scores"`
	Window     []Turn             `json:"window,omitempty"`
	// An entity summary's community: its label, size, members by name (at most 50)
	// and which of them the query named.
	Community string   `json:"community,omitempty"`
	Size      int      `json:"size,omitempty"`
	Members   []string `json:"members,omitempty"`
	Named     []string `json:"named,omitempty"`
}

// EvidenceLeg is what one evidence leg (turns, digests, entities) did.
type EvidenceLeg struct {
	Leg     string `json:"leg"`
	Ran     bool   `json:"ran"`
	Note    string `json:"note,omitempty"`
	Scanned int    `json:"scanned"`
	Matched int    `json:"matched"`
	Served  int    `json:"served"`
}

// PageBudget is what a search's caps kept and cut.
type PageBudget struct {
	MaxTokens  int `json:"max_tokens,omitempty"`
	PerKey     int `json:"per_key,omitempty"`
	PerSession int `json:"per_session,omitempty"`
	Tokens     int `json:"tokens"`
	Tokenizer  struct {
		Encoding    string `json:"encoding"`
		Approximate bool   `json:"approximate"`
	} `json:"tokenizer"`
	Cut []PageCut `json:"cut"`
}

// PageCut is a hit the caps cut: per_key, per_session or budget.
type PageCut struct {
	Kind      string `json:"kind"` // memory, chunk, digest or entity_summary
	Cite      string `json:"cite"`
	MemoryKey string `json:"memory_key,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	Reason    string `json:"reason"`
	Tokens    int    `json:"tokens"`
}

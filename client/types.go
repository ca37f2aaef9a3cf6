package client

import (
	"encoding/json"
	"time"
)

// Memory is a memory as point reads, lists and search hits answer it (schema Memory).
type Memory struct {
	MemoryID           string          `json:"memory_id"`
	Namespace          string          `json:"namespace"`
	MemoryKey          string          `json:"memory_key"`
	Agent              string          `json:"agent"`
	UserID             string          `json:"user_id"`
	SessionID          string          `json:"session_id"`
	Version            int64           `json:"version"`
	VersionText        string          `json:"version_text"`
	Seq                int64           `json:"seq"`
	MemoryType         string          `json:"memory_type"`
	Status             string          `json:"status"`
	Value              json.RawMessage `json:"value"` // canonical JSON
	ContentSHA256      string          `json:"content_sha256"`
	Tags               []string        `json:"tags"`
	Confidence         float64         `json:"confidence"`
	ReinforcementCount int             `json:"reinforcement_count"`
	RecallCount        int             `json:"recall_count"`   // times search served it, folded by the usage fold
	EvidenceCount      int             `json:"evidence_count"` // restatements, merges and duplicates of it, folded by the usage fold
	Actor              string          `json:"actor"`
	SourceClass        string          `json:"source_class"`
	Pinned             bool            `json:"pinned"`
	Locked             bool            `json:"locked"`
	Sensitivity        string          `json:"sensitivity"`
	ValidAt            *time.Time      `json:"valid_at,omitempty"`
	ValidTo            *time.Time      `json:"valid_to,omitempty"`
	ExpiresAt          *time.Time      `json:"expires_at,omitempty"`
	OnExpire           string          `json:"on_expire,omitempty"`
	SupersededBy       string          `json:"superseded_by,omitempty"`
	DuplicateOf        string          `json:"duplicate_of,omitempty"`
	ConflictWith       []string        `json:"conflict_with,omitempty"`
	Redacted           bool            `json:"redacted,omitempty"`
	VerifiedBy         string          `json:"verified_by,omitempty"`
	VerifiedAt         *time.Time      `json:"verified_at,omitempty"`
	// Tombstone marks a deleted memory: only a recovery listing (IncludeTombstoned) lists one.
	Tombstone   bool              `json:"tombstone,omitempty"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	Entities    []string          `json:"entities,omitempty"`
	EntityTypes map[string]string `json:"entity_types,omitempty"`
	Relations   []Relation        `json:"relations,omitempty"`
	// Shared is a promoted row's provenance (its user is SharedUser).
	Shared *Provenance `json:"shared,omitempty"`
}

// Decode decodes the memory's value into v.
func (m Memory) Decode(v any) error { return json.Unmarshal(m.Value, v) }

// Relation is a relation as a row stores it.
type Relation struct {
	Subject     string     `json:"subject"`
	Predicate   string     `json:"predicate"`
	Object      string     `json:"object"`
	ValidFrom   *time.Time `json:"valid_from,omitempty"`
	ValidTo     *time.Time `json:"valid_to,omitempty"`
	Cardinality string     `json:"cardinality"`
}

// Entity is an entity a write names: sent as its name alone when it has no type.
type Entity struct {
	Name string `json:"name"`
	Type string `json:"type,omitempty"`
}

// MarshalJSON sends an untyped entity as its name.
func (e Entity) MarshalJSON() ([]byte, error) {
	if e.Type == "" {
		return json.Marshal(e.Name)
	}
	type plain Entity
	return json.Marshal(plain(e))
}

// RelationInput is a relation a write states.
type RelationInput struct {
	Subject   string    `json:"subject"`
	Predicate string    `json:"predicate"`
	Object    string    `json:"object"`
	ValidFrom time.Time `json:"valid_from,omitzero"`
	ValidTo   time.Time `json:"valid_to,omitzero"`
}

// SetRequest is the body of memory.set (schema SetRequest). Value is required: any
// JSON value, nil included. A nil slice is left out (a live head's tags, entities or
// relations are kept); an empty one is sent as [] (it clears them).
type SetRequest struct {
	Value any `json:"value"`
	Identity
	MemoryType    string          `json:"memory_type,omitempty"`
	Tags          []string        `json:"tags,omitzero"`
	Confidence    *float64        `json:"confidence,omitempty"`
	Pin           bool            `json:"pin,omitempty"`
	TTLSeconds    int             `json:"ttl_seconds,omitempty"`
	ValidAt       time.Time       `json:"valid_at,omitzero"`
	ValidTo       time.Time       `json:"valid_to,omitzero"`
	Sensitivity   string          `json:"sensitivity,omitempty"`
	Proposed      bool            `json:"proposed,omitempty"`
	IfMatchSHA256 string          `json:"if_match_sha256,omitempty"`
	SourceClass   string          `json:"source_class,omitempty"`
	DryRun        bool            `json:"dry_run,omitempty"`
	Entities      []Entity        `json:"entities,omitzero"`
	Relations     []RelationInput `json:"relations,omitzero"`
}

// UpdateRequest is the body of memory.update and, without its identity,
// memory.update_by_id: every field optional, one left out keeps the head's. A nil
// Value keeps the head's value; send json.RawMessage("null") to store null.
type UpdateRequest struct {
	Value any `json:"value,omitempty"`
	Identity
	MemoryType    string          `json:"memory_type,omitempty"`
	Tags          []string        `json:"tags,omitzero"`
	Confidence    *float64        `json:"confidence,omitempty"`
	Pin           bool            `json:"pin,omitempty"`
	TTLSeconds    int             `json:"ttl_seconds,omitempty"`
	ValidAt       time.Time       `json:"valid_at,omitzero"`
	ValidTo       time.Time       `json:"valid_to,omitzero"`
	Sensitivity   string          `json:"sensitivity,omitempty"`
	IfMatchSHA256 string          `json:"if_match_sha256,omitempty"`
	SourceClass   string          `json:"source_class,omitempty"`
	DryRun        bool            `json:"dry_run,omitempty"`
	Entities      []Entity        `json:"entities,omitzero"`
	Relations     []RelationInput `json:"relations,omitzero"`
}

// SetAnswer is what memory.set, memory.update and memory.update_by_id answer.
type SetAnswer struct {
	Replay
	MemoryID           string       `json:"memory_id"`
	Namespace          string       `json:"namespace"`
	MemoryKey          string       `json:"memory_key"`
	Agent              string       `json:"agent"`
	UserID             string       `json:"user_id"`
	SessionID          string       `json:"session_id"`
	Version            int64        `json:"version"`
	VersionText        string       `json:"version_text"`
	Seq                int64        `json:"seq"`
	ContentSHA256      string       `json:"content_sha256"`
	ReinforcementCount int          `json:"reinforcement_count"`
	Event              string       `json:"event,omitempty"`
	Written            bool         `json:"written"`
	DryRun             bool         `json:"dry_run,omitempty"`
	Verdict            string       `json:"verdict"`
	Status             string       `json:"status"`
	MemoryType         string       `json:"memory_type"`
	RetypedFrom        string       `json:"retyped_from,omitempty"`
	Sensitivity        string       `json:"sensitivity"`
	Pinned             bool         `json:"pinned"`
	ExpiresAt          *time.Time   `json:"expires_at,omitempty"`
	OnExpire           string       `json:"on_expire,omitempty"`
	MergedInto         *JudgedPeer  `json:"merged_into,omitempty"`
	DuplicateOf        string       `json:"duplicate_of,omitempty"`
	ConflictWith       []string     `json:"conflict_with,omitempty"`
	Superseded         []string     `json:"superseded,omitempty"`
	Peers              []JudgedPeer `json:"peers"`
	Advisories         []string     `json:"advisories,omitempty"`
}

// JudgedPeer is a peer a memory.set verdict looked at.
type JudgedPeer struct {
	MemoryID  string  `json:"memory_id"`
	MemoryKey string  `json:"memory_key"`
	Agent     string  `json:"agent"`
	UserID    string  `json:"user_id"`
	SessionID string  `json:"session_id"`
	Cosine    float64 `json:"cosine"`
	Verdict   string  `json:"verdict"`
}

// CopyAnswer is what a copy writer (pin, unpin, lock, unlock, reject, verify, restore)
// and memory.delete answer. memory.delete_version of a version the key has moved on
// from answers VersionChanged (and Deleted false) with the head's version, and no Written.
type CopyAnswer struct {
	Replay
	Written        bool   `json:"written"`
	MemoryID       string `json:"memory_id"`
	MemoryKey      string `json:"memory_key"`
	Agent          string `json:"agent,omitempty"`
	UserID         string `json:"user_id,omitempty"`
	SessionID      string `json:"session_id,omitempty"`
	Version        int64  `json:"version"`
	VersionText    string `json:"version_text"`
	Seq            int64  `json:"seq,omitempty"`
	Event          string `json:"event,omitempty"`
	Status         string `json:"status,omitempty"`
	Pinned         bool   `json:"pinned"`
	Locked         bool   `json:"locked"`
	Tombstone      bool   `json:"tombstone"`
	Deleted        bool   `json:"deleted,omitempty"`
	VersionChanged bool   `json:"version_changed,omitempty"`
	Restored       string `json:"restored,omitempty"`
	RestoredStatus string `json:"restored_status,omitempty"`
	Redacted       bool   `json:"redacted,omitempty"`
	// UndidRetirementBy names the row whose retirement of this one an Unsupersede undid.
	UndidRetirementBy string `json:"undid_retirement_by,omitempty"`
}

// Barrier is what a ClickHouse read waited for at the generation barrier.
type Barrier struct {
	Generations map[string]int64 `json:"generations"`
	WaitedMS    int64            `json:"waited_ms"`
}

// ListOptions are memory.list's filters and paging; zero fields are the server's defaults.
type ListOptions struct {
	Order             string // newest (default) or key
	Limit             int    // 1..500, default 50
	PageToken         string
	Identity                   // filters: an empty field does not narrow
	MemoryType        string   // exact
	Tags              []string // every one held, or any with TagsMode "any"
	TagsMode          string
	Status            []string // instead of active and conflicted
	IncludeSuperseded bool
	// IncludeTombstoned lists deleted memories too (a recovery listing); not with AsOf.
	IncludeTombstoned bool
	// AsOf lists the namespace as it was at that time, from history (zero: now).
	AsOf time.Time
}

// ListAnswer is one page of memory.list.
type ListAnswer struct {
	Memories      []Memory `json:"memories"`
	NextPageToken string   `json:"next_page_token,omitempty"`
	Barrier       Barrier  `json:"barrier"`
}

// KeysOptions are memory.keys's filters and paging.
type KeysOptions struct {
	Prefix    string
	Limit     int
	PageToken string
	Identity
	MemoryType string
	Tags       []string
	Status     []string
}

// KeysAnswer is one page of memory.keys.
type KeysAnswer struct {
	Keys []struct {
		MemoryKey string `json:"memory_key"`
		Rows      int    `json:"rows"`
	} `json:"keys"`
	NextPageToken string  `json:"next_page_token,omitempty"`
	Barrier       Barrier `json:"barrier"`
}

// HistoryAnswer is every version of one key, oldest first.
type HistoryAnswer struct {
	MemoryKey string    `json:"memory_key"`
	Namespace string    `json:"namespace"`
	Agent     string    `json:"agent"`
	UserID    string    `json:"user_id"`
	SessionID string    `json:"session_id"`
	Versions  []Version `json:"versions"`
	Barrier   Barrier   `json:"barrier"`
}

// Version is one version of a key as ClickHouse holds it.
type Version struct {
	Version            int64           `json:"version"`
	VersionText        string          `json:"version_text"`
	Seq                int64           `json:"seq"`
	Event              string          `json:"event"`
	MemoryID           string          `json:"memory_id"`
	MemoryType         string          `json:"memory_type"`
	Status             string          `json:"status"`
	Tombstone          bool            `json:"tombstone"`
	Value              json.RawMessage `json:"value"`
	ContentSHA256      string          `json:"content_sha256"`
	Tags               []string        `json:"tags"`
	ReinforcementCount int             `json:"reinforcement_count"`
	Actor              string          `json:"actor"`
	UpdatedAt          time.Time       `json:"updated_at"`
	Redacted           bool            `json:"redacted,omitempty"`
}

// SearchRequest is the body of memory.search (schema SearchRequest).
type SearchRequest struct {
	Query string `json:"query"`
	TopK  int    `json:"top_k,omitempty"` // 0: the server's default
	// Agent, UserID and SessionID filter; empty does not narrow.
	Agent             string    `json:"agent,omitempty"`
	UserID            string    `json:"user_id,omitempty"`
	SessionID         string    `json:"session_id,omitempty"`
	MemoryType        string    `json:"memory_type,omitempty"`
	Namespaces        []string  `json:"namespaces,omitempty"`
	Tags              []string  `json:"tags,omitempty"`
	TagsMode          string    `json:"tags_mode,omitempty"`
	Status            []string  `json:"status,omitempty"`
	IncludeSuperseded bool      `json:"include_superseded,omitempty"`
	AsOf              time.Time `json:"as_of,omitzero"`
	// ReferenceTime is when the question is asked (the conversation's date): the
	// query's relative dates ("yesterday", "last week") are read against its calendar
	// day instead of the server's clock (zero: the server's clock).
	ReferenceTime time.Time `json:"reference_time,omitzero"`
	Mode          string    `json:"mode,omitempty"`
	Recency       bool      `json:"recency,omitempty"`
	PageToken     string    `json:"page_token,omitempty"`
	// Paging keeps the rest of the ranking for a next page: the answer's
	// NextPageToken, passed back as PageToken (a next page keeps paging).
	Paging bool `json:"paging,omitempty"`
	Graph  bool `json:"graph,omitempty"`
	// Retrieval settings over the namespace's retrieval_defaults.
	Recipe          string            `json:"recipe,omitempty"`
	Legs            []string          `json:"legs,omitempty"`
	Weights         *RetrievalWeights `json:"weights,omitempty"`
	Pool            int               `json:"pool,omitempty"`
	MinScore        *float64          `json:"min_score,omitempty"`
	MinDistinctness *float64          `json:"min_distinctness,omitempty"`
	Grounding       string            `json:"grounding,omitempty"`
	Rerank          *bool             `json:"rerank,omitempty"`
	SubQueries      *bool             `json:"sub_queries,omitempty"`
	// SetExpansion searches the names the best hits hold beside the query's words
	// (nil: the server's default, on).
	SetExpansion *bool `json:"set_expansion,omitempty"`
	// AnchorPool adds the rows said in the question's short spans of time that no leg
	// found (nil: the server's default, on).
	AnchorPool *bool `json:"anchor_pool,omitempty"`
	// Entities, SourceClass and Verified narrow the hits to rows naming every entity,
	// of one of the source classes, or verified (true) or not (false).
	Entities    []string `json:"entities,omitempty"`
	SourceClass []string `json:"source_class,omitempty"`
	Verified    *bool    `json:"verified,omitempty"`
	// Trace keeps the search's full trace; the answer names it in TraceID.
	Trace bool `json:"trace,omitempty"`
	// Evidence runs the evidence legs (verbatim chunks and session digests when the
	// scope keeps turns, entity summaries); nil: as the namespace's retrieval_defaults
	// say (off by default). Their hits are in SearchAnswer.Evidence.
	Evidence *bool `json:"evidence,omitempty"`
	// EvidenceLegs names the evidence legs that run (turns, digests, entities); nil: the
	// namespace's retrieval_defaults, else all.
	EvidenceLegs []string `json:"evidence_legs,omitempty"`
	// The page assembler's caps (0: none); SearchAnswer.Budget reports what they cut.
	MaxTokens  int    `json:"max_tokens,omitempty"`
	PerKey     int    `json:"per_key,omitempty"`
	PerSession int    `json:"per_session,omitempty"`
	Tokenizer  string `json:"tokenizer,omitempty"`
	Model      string `json:"model,omitempty"`
}

// Search verdicts: whether the hits are worth using.
const (
	VerdictOK             = "ok"              // the best hit is relevant
	VerdictNoMatch        = "no_match"        // no hit at all
	VerdictBelowThreshold = "below_threshold" // hits, none relevant enough: abstain
	// VerdictLowConfidence: the best hit does not stand out of the namespace's
	// background (the near misses every query finds): abstain.
	VerdictLowConfidence = "low_calibrated_confidence"
	// VerdictUngrounded: the query names an identifier (a name, a code, a number, a
	// quoted phrase) no hit holds, or asks about its entity what no hit states: abstain.
	VerdictUngrounded = "ungrounded_identifier"
)

// SearchAnswer is what memory.search answers.
type SearchAnswer struct {
	Hits          []Hit    `json:"hits"`
	Verdict       string   `json:"verdict"`
	StaleDropped  int      `json:"stale_dropped"`
	Mode          string   `json:"mode"`
	Namespaces    []string `json:"namespaces"`
	NextPageToken string   `json:"next_page_token,omitempty"`
	Barrier       Barrier  `json:"barrier"`
	// RetrievalRisk is how likely the hits are not the answer, with its readings.
	RetrievalRisk RetrievalRisk `json:"retrieval_risk"`
	// Grounding is what identifier grounding found of the query's identifiers.
	Grounding Grounding `json:"grounding"`
	// Explain is how the search went: settings, plan, background, gates, reranker.
	Explain *SearchExplain `json:"explain,omitempty"`
	// TraceID names the kept trace (SearchTrace) when the request asked for one.
	TraceID string `json:"trace_id,omitempty"`
	// PendingExtraction: a deferred extraction of the search's scope is not done yet.
	PendingExtraction bool `json:"pending_extraction"`
	// Evidence holds the evidence legs' hits: verbatim chunks and session digests, apart
	// from the memory hits (nil when the legs did not run).
	Evidence *SearchEvidence `json:"evidence,omitempty"`
	// Budget is what the caps kept and cut (nil when the request set none).
	Budget *PageBudget `json:"budget,omitempty"`
}

// Abstain reports whether the caller should answer "I don't know": no hit, or none
// the server's gates judge relevant (every verdict but ok).
func (a *SearchAnswer) Abstain() bool { return a.Verdict != VerdictOK }

// RetrievalRisk is a search's risk score in [0, 1] (about 0.5 at a gate's threshold),
// its level (low, medium, high) and its components.
type RetrievalRisk struct {
	Score      float64 `json:"score"`
	Level      string  `json:"level"`
	Components struct {
		Relevance          float64  `json:"relevance"`
		Floor              float64  `json:"floor"`
		Distinctness       *float64 `json:"distinctness"`
		Calibration        string   `json:"calibration"` // pool, namespace or fallback
		MissingIdentifiers []string `json:"missing_identifiers"`
		AttributeMissing   bool     `json:"attribute_missing"`
		Margin             float64  `json:"margin"`
		StaleDropped       int      `json:"stale_dropped"`
		RerankFailed       bool     `json:"rerank_failed"`
	} `json:"components"`
}

// Grounding is what a search found of the identifiers its query names.
type Grounding struct {
	Setting     string              `json:"setting"`
	Identifiers []QueryIdentifier   `json:"identifiers"`
	Missing     []string            `json:"missing"`
	Attribute   *AttributeGrounding `json:"attribute,omitempty"`
}

// QueryIdentifier is something a query names: kind name, code, number or quoted.
type QueryIdentifier struct {
	Text string `json:"text"`
	Kind string `json:"kind"`
}

// AttributeGrounding is whether a hit naming the query's entity states what it asks.
type AttributeGrounding struct {
	Terms []string `json:"terms"`
	Found bool     `json:"found"`
}

// SearchExplain is a search's explain block.
type SearchExplain struct {
	Settings   json.RawMessage `json:"settings"`
	Plan       QueryPlan       `json:"plan"`
	Background struct {
		Source string  `json:"source"`
		Rows   int     `json:"rows"`
		Median float64 `json:"median"`
		Spread float64 `json:"spread"`
		Tenth  float64 `json:"tenth"`
	} `json:"background"`
	Gates  []Gate `json:"gates"`
	Rerank struct {
		Status   string `json:"status"` // off, reordered, kept, failed
		Reranker string `json:"reranker,omitempty"`
		Sent     int    `json:"sent"`
		Pinned   int    `json:"pinned"`
		Error    string `json:"error,omitempty"`
		Millis   int64  `json:"ms"`
	} `json:"rerank"`
	// HyDE is what the hypothetical answer did for the vector leg.
	HyDE struct {
		Status  string `json:"status"` // off, used, failed
		Model   string `json:"model,omitempty"`
		Passage string `json:"passage,omitempty"`
		Error   string `json:"error,omitempty"`
		Millis  int64  `json:"ms"`
	} `json:"hyde"`
	// Anchor is what the date anchor pool read and added.
	Anchor struct {
		Status string `json:"status"` // off, ran
		Spans  []struct {
			Text string    `json:"text"`
			From time.Time `json:"from"`
			To   time.Time `json:"to"`
		} `json:"spans,omitempty"`
		Read  int `json:"read"`
		Added int `json:"added"`
	} `json:"anchor"`
	// EvidenceLegs are what the evidence legs did on a first page.
	EvidenceLegs []EvidenceLeg `json:"evidence_legs,omitempty"`
}

// QueryPlan is what the planner read in the query.
type QueryPlan struct {
	Identifiers []QueryIdentifier `json:"identifiers"`
	Entities    []string          `json:"entities"`
	Dates       []struct {
		Text     string    `json:"text"`
		From     time.Time `json:"from"`
		To       time.Time `json:"to"`
		Relative bool      `json:"relative"`
	} `json:"dates"`
	Recency        bool     `json:"recency"`
	Preference     bool     `json:"preference"`
	Attribute      string   `json:"attribute,omitempty"`
	SubQueries     []string `json:"sub_queries"`
	AttributeTerms []string `json:"attribute_terms"`
	DateTerms      []string `json:"date_terms"`
	Expansion      string   `json:"expansion,omitempty"` // what set expansion searched
}

// Gate is one check of a search's verdict.
type Gate struct {
	Name      string  `json:"name"` // hits, floor, distinctness, grounding, attribute
	Value     float64 `json:"value"`
	Threshold float64 `json:"threshold"`
	Passed    bool    `json:"passed"`
	Source    string  `json:"source,omitempty"`
	// Waived is what grounding confirmed when it passed a distinctness gate whose
	// value is below its threshold: attribute or identifiers.
	Waived string `json:"waived,omitempty"`
}

// SearchTrace is memory.search_trace's answer: the kept trace of one search.
type SearchTrace struct {
	TraceID   string          `json:"trace_id"`
	CreatedAt time.Time       `json:"created_at"`
	ExpiresAt time.Time       `json:"expires_at"`
	Trace     json.RawMessage `json:"trace"`
	// StaleDropped counts the memories the trace named that are no longer served,
	// left out of it.
	StaleDropped int `json:"stale_dropped"`
}

// Hit is a search hit: the key's current head and what ranked it.
type Hit struct {
	Memory
	Score  float64 `json:"score"`
	Scores Scores  `json:"scores"`
}

// Scores is what ranked a hit, per component.
type Scores struct {
	Vector          float64  `json:"vector"`
	Lexical         float64  `json:"lexical"`
	LexicalCoverage float64  `json:"lexical_coverage"`
	Key             float64  `json:"key"`
	Graph           *float64 `json:"graph,omitempty"`
	Date            *float64 `json:"date,omitempty"`   // 1 when the row states a date the query asks about
	Rerank          *float64 `json:"rerank,omitempty"` // the reranker's score, when it scored the hit
	Prior           float64  `json:"prior"`
	Trust           *float64 `json:"trust,omitempty"` // the provenance tail inside the prior, when not 0
	Fused           float64  `json:"fused"`
	Relevance       float64  `json:"relevance"`
}

// ClearRequest narrows memory.clear to an identity scope; an empty field does not narrow.
type ClearRequest struct {
	Agent     string `json:"agent,omitempty"`
	UserID    string `json:"user_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
}

// ClearAnswer is what memory.clear answers.
type ClearAnswer struct {
	Replay
	Tombstoned    int `json:"tombstoned"`
	SkippedLocked int `json:"skipped_locked"`
	Batches       int `json:"batches"`
}

// BulkSetRequest is the body of memory.bulk_set.
type BulkSetRequest struct {
	Entries []BulkEntry `json:"entries"`
	DryRun  bool        `json:"dry_run,omitempty"`
}

// BulkEntry is one entry of memory.bulk_set: memory.set's body and the entry's key.
type BulkEntry struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
	Identity
	MemoryType  string          `json:"memory_type,omitempty"`
	Tags        []string        `json:"tags,omitzero"`
	Confidence  *float64        `json:"confidence,omitempty"`
	Pin         bool            `json:"pin,omitempty"`
	TTLSeconds  int             `json:"ttl_seconds,omitempty"`
	ValidAt     time.Time       `json:"valid_at,omitzero"`
	ValidTo     time.Time       `json:"valid_to,omitzero"`
	Sensitivity string          `json:"sensitivity,omitempty"`
	SourceClass string          `json:"source_class,omitempty"`
	Entities    []Entity        `json:"entities,omitzero"`
	Relations   []RelationInput `json:"relations,omitzero"`
}

// BulkAnswer is what memory.bulk_set answers: every entry's index is in exactly one list.
type BulkAnswer struct {
	Replay
	Written          []BulkResult `json:"written"`
	Merged           []BulkResult `json:"merged"`
	SkippedPinned    []int        `json:"skipped_pinned"`
	SkippedLocked    []int        `json:"skipped_locked"`
	SkippedUnchanged []int        `json:"skipped_unchanged"`
	Blacklisted      []int        `json:"blacklisted"`
	ReplacedInBatch  []int        `json:"replaced_in_batch"`
	Superseded       []string     `json:"superseded"`
	DryRun           bool         `json:"dry_run,omitempty"`
}

// BulkResult is what one entry of memory.bulk_set did.
type BulkResult struct {
	Index       int    `json:"index"`
	MemoryKey   string `json:"memory_key"`
	MemoryID    string `json:"memory_id,omitempty"`
	Version     int64  `json:"version,omitempty"`
	VersionText string `json:"version_text,omitempty"`
	Seq         int64  `json:"seq,omitempty"`
	Verdict     string `json:"verdict"`
	Status      string `json:"status,omitempty"`
	MergedInto  string `json:"merged_into,omitempty"`
}

// SweepExpiredAnswer is what memory.sweep_expired answers.
type SweepExpiredAnswer struct {
	Expired int `json:"expired"`
}

// RedactRequest names the version memory.redact scrubs, and its key's identity.
type RedactRequest struct {
	Version string `json:"version"` // the version_text
	Identity
}

// RedactAnswer is what memory.redact answers.
type RedactAnswer struct {
	Replay
	MemoryID         string    `json:"memory_id"`
	MemoryKey        string    `json:"memory_key"`
	Agent            string    `json:"agent"`
	UserID           string    `json:"user_id"`
	SessionID        string    `json:"session_id"`
	Version          int64     `json:"version"`
	VersionText      string    `json:"version_text"`
	RedactedVersions []string  `json:"redacted_versions"`
	Seq              int64     `json:"seq"`
	Event            string    `json:"event"`
	RedactedAt       time.Time `json:"redacted_at"`
	// ForgottenTurns counts the conversation's turns the redacted versions were drawn
	// from, deleted with their data keys.
	ForgottenTurns int64 `json:"forgotten_turns"`
}

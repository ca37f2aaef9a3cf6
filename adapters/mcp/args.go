package mcp

import (
	"errors"
	"fmt"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/memrow"
)

// The tools' arguments. Their jsonschema tags are the descriptions a model reads.

type identityArgs struct {
	Agent     string `json:"agent,omitempty" jsonschema:"The agent the memory belongs to. Leave out for the default agent."`
	UserID    string `json:"user_id,omitempty" jsonschema:"The user the memory is about. Leave out for the default user (or, with a token bound to one user, that user)."`
	SessionID string `json:"session_id,omitempty" jsonschema:"The session the memory belongs to. Leave out for a memory that outlives sessions."`
}

func (a identityArgs) identity() client.Identity {
	return client.Identity{Agent: a.Agent, UserID: a.UserID, SessionID: a.SessionID}
}

type keyArgs struct {
	Namespace string `json:"namespace" jsonschema:"The namespace, a name such as 'support' or 'alice-notes' (letters, digits, '.', '_', '-')."`
	Key       string `json:"key" jsonschema:"The memory's key: a short stable name for what it is about, such as 'editor-theme' or 'home-city'."`
	identityArgs
}

// check refuses a key the REST API would refuse, before it is sent: the key travels
// in the REST call's path, and fasthttp reads the request line with the headers into
// one 4 KB buffer, so a key of a few KB was answered 431 HEADERS_TOO_LARGE instead of
// naming the key as REST does a key under that size.
func (a keyArgs) check() error {
	if err := memrow.ValidateKey(a.Key); err != nil {
		var fe *memrow.FieldError
		if errors.As(err, &fe) {
			return &argError{fe.Field, fe.Message}
		}
		return err
	}
	return nil
}

type setArgs struct {
	keyArgs
	Value          any      `json:"value" jsonschema:"What to remember: a sentence, or any JSON value. Writing a key again revises it; the same value again reinforces it."`
	MemoryType     string   `json:"memory_type,omitempty" jsonschema:"The kind of memory: 'fact' (the default), 'preference', 'decision', 'episodic', 'profile', or another name."`
	Tags           []string `json:"tags,omitempty" jsonschema:"Labels to filter by later. Leave out to keep the current ones."`
	Confidence     *float64 `json:"confidence,omitempty" jsonschema:"How sure you are, 0 to 1 (default 1)."`
	Pin            bool     `json:"pin,omitempty" jsonschema:"Pin the memory: later writes of another value for this key are refused unless they pin too."`
	TTLSeconds     int      `json:"ttl_seconds,omitempty" jsonschema:"Forget the memory this many seconds from now."`
	ValidAt        string   `json:"valid_at,omitempty" jsonschema:"When the fact became true, RFC 3339 (2026-03-14T09:00:00Z)."`
	ValidTo        string   `json:"valid_to,omitempty" jsonschema:"When the fact stops being true, RFC 3339; it is hidden from then on."`
	Proposed       bool     `json:"proposed,omitempty" jsonschema:"Write it as a proposal for review instead of an established fact."`
	IfMatchSHA256  string   `json:"if_match_sha256,omitempty" jsonschema:"Write only if the key still holds the value with this content_sha256 (from an earlier read)."`
	DryRun         bool     `json:"dry_run,omitempty" jsonschema:"Judge the write and answer what it would do, writing nothing."`
	IdempotencyKey string   `json:"idempotency_key,omitempty" jsonschema:"Any unique string: sending the same call again with it never writes twice."`
}

func (a setArgs) request() (client.SetRequest, error) {
	validAt, err := parseTime("valid_at", a.ValidAt)
	if err != nil {
		return client.SetRequest{}, err
	}
	validTo, err := parseTime("valid_to", a.ValidTo)
	if err != nil {
		return client.SetRequest{}, err
	}
	return client.SetRequest{Value: a.Value, Identity: a.identity(), MemoryType: a.MemoryType, Tags: a.Tags,
		Confidence: a.Confidence, Pin: a.Pin, TTLSeconds: a.TTLSeconds, ValidAt: validAt, ValidTo: validTo,
		Proposed: a.Proposed, IfMatchSHA256: a.IfMatchSHA256, DryRun: a.DryRun}, nil
}

type getArgs struct {
	keyArgs
	AsOf string `json:"as_of,omitempty" jsonschema:"Read the value the key held at this time, RFC 3339, instead of the current one."`
}

type historyArgs struct {
	keyArgs
}

type deleteArgs struct {
	keyArgs
	Version        string `json:"version,omitempty" jsonschema:"Delete only if the key still holds this version (its version_text from a read); otherwise nothing is deleted and the answer says version_changed."`
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"Any unique string: sending the same call again with it never deletes twice."`
}

// filterArgs narrow a search or a list; a field left out does not narrow.
type filterArgs struct {
	Agent      string   `json:"agent,omitempty" jsonschema:"Only this agent's memories."`
	UserID     string   `json:"user_id,omitempty" jsonschema:"Only this user's memories."`
	SessionID  string   `json:"session_id,omitempty" jsonschema:"Only this session's memories."`
	MemoryType string   `json:"memory_type,omitempty" jsonschema:"Only memories of this type."`
	Tags       []string `json:"tags,omitempty" jsonschema:"Only memories holding every one of these tags."`
}

type searchArgs struct {
	Namespace string `json:"namespace" jsonschema:"The namespace to search."`
	Query     string `json:"query" jsonschema:"What you want to know, in words: 'what theme does the user like?'."`
	TopK      int    `json:"top_k,omitempty" jsonschema:"How many memories at most (default 10, up to 100)."`
	filterArgs
	Namespaces []string `json:"namespaces,omitempty" jsonschema:"Further namespaces to search as well (at most 7)."`
	AsOf       string   `json:"as_of,omitempty" jsonschema:"Only memories valid at this time, RFC 3339."`
	Graph      bool     `json:"graph,omitempty" jsonschema:"Also follow the entities the query names through the entity graph."`
	PageToken  string   `json:"page_token,omitempty" jsonschema:"next_page_token of an earlier answer, for more of the same ranking."`
	Paging     bool     `json:"paging,omitempty" jsonschema:"Keep the rest of the ranking for more pages: the answer then names a page_token."`
	provenanceArgs
}

// provenanceArgs narrow a search by what a memory names and where it came from.
type provenanceArgs struct {
	Entities    []string `json:"entities,omitempty" jsonschema:"Only memories naming every one of these entities (case and spacing ignored)."`
	SourceClass []string `json:"source_class,omitempty" jsonschema:"Only memories of one of these source classes: direct, derived, external, imported."`
	Verified    *bool    `json:"verified,omitempty" jsonschema:"true: only memories someone verified; false: only those nobody did."`
}

func (a searchArgs) request() (client.SearchRequest, error) {
	asOf, err := parseTime("as_of", a.AsOf)
	return client.SearchRequest{Query: a.Query, TopK: a.TopK, Agent: a.Agent, UserID: a.UserID, SessionID: a.SessionID,
		MemoryType: a.MemoryType, Tags: a.Tags, Namespaces: a.Namespaces, AsOf: asOf, Graph: a.Graph, PageToken: a.PageToken, Paging: a.Paging,
		Entities: a.Entities, SourceClass: a.SourceClass, Verified: a.Verified}, err
}

type askArgs struct {
	Namespace string `json:"namespace" jsonschema:"The namespace whose memories answer."`
	Query     string `json:"query" jsonschema:"The question, in words: 'where does the user live?'."`
	TopK      int    `json:"top_k,omitempty" jsonschema:"How many memories the answer may read (default 8)."`
	filterArgs
	Namespaces []string `json:"namespaces,omitempty" jsonschema:"Further namespaces to read as well (at most 7)."`
}

func (a askArgs) request() client.AskRequest {
	return client.AskRequest{Query: a.Query, TopK: a.TopK, Agent: a.Agent, UserID: a.UserID, SessionID: a.SessionID,
		MemoryType: a.MemoryType, Tags: a.Tags, Namespaces: a.Namespaces}
}

type listArgs struct {
	Namespace string `json:"namespace" jsonschema:"The namespace to list."`
	Order     string `json:"order,omitempty" jsonschema:"'newest' (the default) or 'key'."`
	Limit     int    `json:"limit,omitempty" jsonschema:"How many memories per page (default 50, up to 500)."`
	PageToken string `json:"page_token,omitempty" jsonschema:"next_page_token of the previous page."`
	filterArgs
}

func (a listArgs) options() client.ListOptions {
	return client.ListOptions{Order: a.Order, Limit: a.Limit, PageToken: a.PageToken,
		Identity: client.Identity{Agent: a.Agent, UserID: a.UserID, SessionID: a.SessionID}, MemoryType: a.MemoryType, Tags: a.Tags}
}

// argError is a bad argument the server never saw; it answers as VALIDATION_FAILED.
type argError struct{ field, msg string }

func (e *argError) Error() string { return fmt.Sprintf("%s: %s", e.field, e.msg) }

func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, &argError{field, "not an RFC 3339 time such as 2026-03-14T09:00:00Z"}
	}
	return t, nil
}

package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Structured profiles (profile_schema.set, profile.structured, profile.render) and
// memory.consolidate with its undo.

// ProfileSchemaAnswer is profile_schema.set's answer.
type ProfileSchemaAnswer struct {
	Namespace  string    `json:"namespace"`
	SchemaHash string    `json:"schema_hash"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Profile is a user's structured profile (profile.structured).
type Profile struct {
	Namespace   string          `json:"namespace"`
	UserID      string          `json:"user_id"`
	Profile     json.RawMessage `json:"profile"`
	MemoryID    string          `json:"memory_id"`
	MemoryKey   string          `json:"memory_key"`
	Version     int64           `json:"version"`
	VersionText string          `json:"version_text"`
	UpdatedAt   time.Time       `json:"updated_at"`
	SchemaHash  string          `json:"schema_hash"`
	Digest      string          `json:"digest"`
	Sources     int             `json:"sources"`
	Stale       bool            `json:"stale"`
}

// RenderedProfile is profile.render's answer.
type RenderedProfile struct {
	Namespace string `json:"namespace"`
	UserID    string `json:"user_id"`
	Format    string `json:"format"`
	Text      string `json:"text"`
	Citation  string `json:"citation"`
	// Citations names every row rendered, in the text's order: the structured profile,
	// then the profile section of preferences and decisions.
	Citations []string `json:"citations"`
}

// ConsolidateRequest is memory.consolidate's body.
type ConsolidateRequest struct {
	UserID        string   `json:"user_id,omitempty"`
	DryRun        bool     `json:"dry_run,omitempty"`
	MinSimilarity *float64 `json:"min_similarity,omitempty"`
	MaxClusters   *int     `json:"max_clusters,omitempty"`
}

// ConsolidateAnswer is memory.consolidate's answer.
type ConsolidateAnswer struct {
	RunID                  string               `json:"run_id,omitempty"`
	DryRun                 bool                 `json:"dry_run"`
	Candidates             int                  `json:"candidates"`
	Clusters               []ConsolidateCluster `json:"clusters"`
	ModelCalls             int                  `json:"model_calls"`
	MergedRows             int                  `json:"merged_rows"`
	ModelCallsPerMergedRow float64              `json:"model_calls_per_merged_row"`
	Failures               []ConsolidateFailure `json:"failures"`
}

// ConsolidateCluster is one cluster of a run.
type ConsolidateCluster struct {
	Status  string `json:"status"`
	Members []struct {
		MemoryID  string `json:"memory_id"`
		MemoryKey string `json:"memory_key"`
		Agent     string `json:"agent"`
		UserID    string `json:"user_id"`
		Version   int64  `json:"version"`
	} `json:"members"`
	Summary *struct {
		MemoryID    string   `json:"memory_id"`
		MemoryKey   string   `json:"memory_key"`
		Version     int64    `json:"version"`
		VersionText string   `json:"version_text"`
		DerivedFrom []string `json:"derived_from"`
	} `json:"summary,omitempty"`
}

// ConsolidateFailure is a cluster a run did not merge.
type ConsolidateFailure struct {
	Cluster int    `json:"cluster"`
	Reason  string `json:"reason"`
	Key     string `json:"key,omitempty"`
}

// ConsolidationUndoAnswer is memory.consolidate_undo's answer.
type ConsolidationUndoAnswer struct {
	RunID    string `json:"run_id"`
	Restored int    `json:"restored"`
	Retired  int    `json:"retired"`
	Left     []struct {
		MemoryID string `json:"memory_id"`
		Reason   string `json:"reason"`
	} `json:"left"`
}

func profilePath(ns, userID string) string {
	return nsPath(ns) + "/profiles/" + strings.ReplaceAll(url.PathEscape(userID), ":", "%3A")
}

// SetProfileSchema sets a namespace's profile schema, a JSON Schema object in strict
// structured output's subset (profile_schema.set; an admin's of every user).
func (c *Client) SetProfileSchema(ctx context.Context, ns string, schema any) (*ProfileSchemaAnswer, error) {
	k := c.newCall(http.MethodPut, nsPath(ns)+"/profile-schema", nil)
	k.body = map[string]any{"schema": schema}
	var a ProfileSchemaAnswer
	return &a, c.into(ctx, k, &a)
}

// Profile reads a user's structured profile (profile.structured).
func (c *Client) Profile(ctx context.Context, ns, userID string) (*Profile, error) {
	k := c.newCall(http.MethodGet, profilePath(ns, userID), nil)
	var a Profile
	return &a, c.into(ctx, k, &a)
}

// RenderProfile renders a user's profile as prompt text, format "markdown" (the
// default) or "text" (profile.render).
func (c *Client) RenderProfile(ctx context.Context, ns, userID, format string) (*RenderedProfile, error) {
	k := c.newCall(http.MethodGet, profilePath(ns, userID)+"/render", nil)
	if format != "" {
		k.query = url.Values{"format": {format}}
	}
	var a RenderedProfile
	return &a, c.into(ctx, k, &a)
}

// Consolidate merges a scope's similar memories into summaries, or with DryRun
// answers the clusters alone (memory.consolidate; an admin's).
func (c *Client) Consolidate(ctx context.Context, ns string, req ConsolidateRequest) (*ConsolidateAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/memories:consolidate", nil)
	k.body = req
	var a ConsolidateAnswer
	return &a, c.into(ctx, k, &a)
}

// UndoConsolidation undoes a consolidation run: its merged rows restored, its
// summaries retired (memory.consolidate_undo).
func (c *Client) UndoConsolidation(ctx context.Context, ns, runID string) (*ConsolidationUndoAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/consolidations/"+url.PathEscape(runID)+":undo", nil)
	var a ConsolidationUndoAnswer
	return &a, c.into(ctx, k, &a)
}

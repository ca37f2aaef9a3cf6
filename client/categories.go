package client

import (
	"context"
	"net/http"
)

// AssignCategoryRequest links a memory to categories (tags) and rescinds links; the
// identity names the key's agent, user and session.
type AssignCategoryRequest struct {
	Identity
	Categories []string `json:"categories,omitempty"`
	Rescind    []string `json:"rescind,omitempty"`
}

// AssignCategoryAnswer is the revision that carries the links, or the head as it
// stands when the op changed nothing.
type AssignCategoryAnswer struct {
	CopyAnswer
	Categories []string `json:"categories"`
	Linked     []string `json:"linked"`
	Rescinded  []string `json:"rescinded"`
}

// AssignCategory links the key's memory to categories and rescinds links
// (memory.assign_category).
func (c *Client) AssignCategory(ctx context.Context, ns, key string, req AssignCategoryRequest, opts ...CallOption) (*AssignCategoryAnswer, error) {
	k := c.newCall(http.MethodPost, keyPath(ns, key)+":assign_category", opts)
	k.body = req
	var a AssignCategoryAnswer
	return &a, c.write(ctx, k, &a)
}

// Categories is a namespace's taxonomy: each category its live memories hold, most
// held first, and how many hold none.
type Categories struct {
	Namespace  string `json:"namespace"`
	Categories []struct {
		Category string `json:"category"`
		Memories int64  `json:"memories"`
	} `json:"categories"`
	Untagged int64 `json:"untagged"`
	Sampled  int64 `json:"sampled"`
}

// Categories reads the namespace's categories (loom.fetch_namespace_categories).
func (c *Client) Categories(ctx context.Context, ns string) (*Categories, error) {
	var a Categories
	return &a, c.into(ctx, c.newCall(http.MethodGet, nsPath(ns)+"/categories", nil), &a)
}

// Finding is one problem namespace.validate found, of the policy (Field) or of a
// memory (MemoryKey and its identity).
type Finding struct {
	Code      string `json:"code"`
	Severity  string `json:"severity"` // error or warning
	Field     string `json:"field,omitempty"`
	MemoryKey string `json:"memory_key,omitempty"`
	Agent     string `json:"agent,omitempty"`
	UserID    string `json:"user_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	MemoryID  string `json:"memory_id,omitempty"`
	Version   int64  `json:"version,omitempty"`
	Message   string `json:"message"`
}

// Validation is namespace.validate's report.
type Validation struct {
	Namespace string         `json:"namespace"`
	Valid     bool           `json:"valid"`
	Findings  []Finding      `json:"findings"`
	Counts    map[string]int `json:"counts"`
	Checked   struct {
		Heads    int `json:"heads"`
		Patterns int `json:"patterns"`
	} `json:"checked"`
	Coverage struct {
		Complete bool `json:"complete"`
	} `json:"coverage"`
}

// ValidateNamespace dry-runs the namespace's policy over its contents (namespace.validate).
func (c *Client) ValidateNamespace(ctx context.Context, ns string) (*Validation, error) {
	var a Validation
	return &a, c.into(ctx, c.newCall(http.MethodGet, nsPath(ns)+"/validate", nil), &a)
}

// TypeCalibration is one memory type's background and suggested conflict gate.
type TypeCalibration struct {
	MemoryType    string   `json:"memory_type"`
	Rows          int      `json:"rows"`
	Pairs         int      `json:"pairs"`
	Mean          float64  `json:"mean"`
	Spread        float64  `json:"spread"`
	P50           float64  `json:"p50"`
	P99           float64  `json:"p99"`
	Max           float64  `json:"max"`
	Current       float64  `json:"current"`
	CurrentSource string   `json:"current_source"`
	Suggested     *float64 `json:"suggested"`
	Reason        string   `json:"reason,omitempty"`
}

// Tuning is namespace.tune's report; Patch holds the policy fields that apply it.
type Tuning struct {
	Namespace string            `json:"namespace"`
	Types     []TypeCalibration `json:"types"`
	Patch     map[string]any    `json:"patch"`
	Skipped   []string          `json:"skipped"`
}

// TuneNamespace reports the calibration the namespace's vectors suggest (namespace.tune).
func (c *Client) TuneNamespace(ctx context.Context, ns string) (*Tuning, error) {
	var a Tuning
	return &a, c.into(ctx, c.newCall(http.MethodGet, nsPath(ns)+"/tune", nil), &a)
}

package client

import (
	"context"
	"net/http"
	"time"
)

// The conflict allowlist: pairs of a namespace's memories its writers said are
// neither in conflict nor duplicates. memory.set's verdict and the conflict resolver
// skip a listed pair.

// AllowlistAnswer is what AllowPair and DisallowPair answer.
type AllowlistAnswer struct {
	Namespace string    `json:"namespace"`
	MemoryIDs [2]string `json:"memory_ids"`
	// Listed: the pair is on the list after the call; Changed: the call added or
	// removed it.
	Listed  bool `json:"listed"`
	Changed bool `json:"changed"`
	// Cleared names the rows whose conflict flag against the other, or duplicate link
	// to it, AllowPair cleared.
	Cleared []string `json:"cleared,omitempty"`
}

// AllowlistedPair is one listed pair.
type AllowlistedPair struct {
	MemoryIDs [2]string `json:"memory_ids"`
	AddedBy   string    `json:"added_by"`
	AddedAt   time.Time `json:"added_at"`
}

// Allowlist is a namespace's listed pairs (conflict_allowlist.list).
type Allowlist struct {
	Namespace string            `json:"namespace"`
	Pairs     []AllowlistedPair `json:"pairs"`
}

// AllowPair lists two memories as not in conflict and not duplicates
// (conflict_allowlist.add), and clears a flag or duplicate link between them.
func (c *Client) AllowPair(ctx context.Context, ns, memoryA, memoryB string) (*AllowlistAnswer, error) {
	return c.allowlist(ctx, http.MethodPost, ns, memoryA, memoryB)
}

// DisallowPair takes a pair off the list (conflict_allowlist.remove): it is judged
// again from the next write of either row.
func (c *Client) DisallowPair(ctx context.Context, ns, memoryA, memoryB string) (*AllowlistAnswer, error) {
	return c.allowlist(ctx, http.MethodDelete, ns, memoryA, memoryB)
}

// ConflictAllowlist reads a namespace's listed pairs (conflict_allowlist.list).
func (c *Client) ConflictAllowlist(ctx context.Context, ns string) (*Allowlist, error) {
	var a Allowlist
	return &a, c.into(ctx, c.newCall(http.MethodGet, nsPath(ns)+"/conflict-allowlist", nil), &a)
}

func (c *Client) allowlist(ctx context.Context, method, ns, memoryA, memoryB string) (*AllowlistAnswer, error) {
	k := c.newCall(method, nsPath(ns)+"/conflict-allowlist", nil)
	k.body = map[string][]string{"memory_ids": {memoryA, memoryB}}
	var a AllowlistAnswer
	return &a, c.into(ctx, k, &a)
}

package client

import (
	"context"
	"net/http"
	"time"
)

// ModelCalls is the org's switch for model calls (org.model_calls).
type ModelCalls struct {
	Org    string     `json:"org"`
	Held   bool       `json:"held"`
	HeldAt *time.Time `json:"held_at,omitempty"`
	HeldBy string     `json:"held_by,omitempty"`
	// Resumed counts the held extraction requests a release made due.
	Resumed int64 `json:"resumed,omitempty"`
}

// ModelCalls reads whether the org's model calls are held (an admin token of the whole org).
func (c *Client) ModelCalls(ctx context.Context) (*ModelCalls, error) {
	var a ModelCalls
	return &a, c.into(ctx, c.newCall(http.MethodGet, "/v1/orgs/self/model-calls", nil), &a)
}

// SetModelCalls holds (true) or releases (false) the org's model calls: held, the
// workers leave the org's rows owed and its deferred extractions wait in status held;
// released, they run again.
func (c *Client) SetModelCalls(ctx context.Context, held bool) (*ModelCalls, error) {
	k := c.newCall(http.MethodPut, "/v1/orgs/self/model-calls", nil)
	k.body = map[string]bool{"held": held}
	var a ModelCalls
	return &a, c.into(ctx, k, &a)
}

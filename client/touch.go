package client

import (
	"context"
	"net/http"
)

// TouchAnswer is memory.touch's answer.
type TouchAnswer struct {
	MemoryID  string `json:"memory_id"`
	MemoryKey string `json:"memory_key"`
	Touched   bool   `json:"touched"`
}

// Touch records that the caller used a memory (memory.touch): the usage fold adds each
// touch to the row's reinforcement_count, which lifts it among equally relevant hits.
func (c *Client) Touch(ctx context.Context, ns, key string, id Identity, opts ...CallOption) (*TouchAnswer, error) {
	k := c.newCall(http.MethodPost, keyPath(ns, key)+":touch", opts)
	k.body = id
	var a TouchAnswer
	return &a, c.into(ctx, k, &a)
}

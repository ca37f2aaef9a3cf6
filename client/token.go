package client

import (
	"context"
	"net/http"
)

// TokenSelf is what GET /v1/token answers: what the caller's own token reaches.
type TokenSelf struct {
	TokenID    string   `json:"token_id"`
	Org        string   `json:"org"`
	Role       string   `json:"role"`
	Name       string   `json:"name"`
	Namespaces []string `json:"namespaces"` // nil: every namespace of the org
	ReadUserID string   `json:"read_user_id,omitempty"`
	// ReadSessionID is the one session an own_session token reaches.
	ReadSessionID string `json:"read_session_id,omitempty"`
	CanWrite      bool   `json:"can_write"`
}

// TokenSelf reads what the client's token reaches (token.self): its org, role,
// namespaces and bound user, and whether it may write.
func (c *Client) TokenSelf(ctx context.Context) (*TokenSelf, error) {
	var t TokenSelf
	return &t, c.into(ctx, c.newCall(http.MethodGet, "/v1/token", nil), &t)
}

package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Learning is a rule about the agent itself that memory.set_from_messages filed to
// the learnings queue instead of the memories, with the users' quotes that support it.
type Learning struct {
	CandidateID string              `json:"candidate_id"`
	Agent       string              `json:"agent"`
	Rule        string              `json:"rule"`
	Status      string              `json:"status"` // pending
	Source      string              `json:"source"` // assistant_turn
	CreatedAt   time.Time           `json:"created_at"`
	Supporters  []LearningSupporter `json:"supporters"`
}

// LearningSupporter is a user's message that supports a learning.
type LearningSupporter struct {
	UserID       string    `json:"user_id"`
	SessionID    string    `json:"session_id"`
	MessageIndex int       `json:"message_index"`
	Quote        string    `json:"quote"`
	CreatedAt    time.Time `json:"created_at"`
}

// LearningsAnswer is learnings.list's answer, newest first.
type LearningsAnswer struct {
	Namespace string     `json:"namespace"`
	Learnings []Learning `json:"learnings"`
}

// LearningsOptions narrow learnings.list.
type LearningsOptions struct {
	Agent string // "" every agent's
	Limit int    // 0: the server's 100
}

// Learnings lists a namespace's learnings queue (learnings.list: GET
// /v1/namespaces/{ns}/learnings; an admin or writer token, a user-bound one seeing only
// what its user supports).
func (c *Client) Learnings(ctx context.Context, ns string, o LearningsOptions) (*LearningsAnswer, error) {
	k := c.newCall(http.MethodGet, nsPath(ns)+"/learnings", nil)
	q := url.Values{}
	if o.Agent != "" {
		q.Set("agent", o.Agent)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	k.query = q
	var a LearningsAnswer
	return &a, c.into(ctx, k, &a)
}

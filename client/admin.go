package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Namespace reads a namespace's write policy and blacklist (namespace.get).
func (c *Client) Namespace(ctx context.Context, ns string) (*NamespaceAnswer, error) {
	var a NamespaceAnswer
	return &a, c.into(ctx, c.newCall(http.MethodGet, nsPath(ns), nil), &a)
}

// Blacklist reads the same answer through /v1/namespaces/{ns}/blacklist.
func (c *Client) Blacklist(ctx context.Context, ns string) (*NamespaceAnswer, error) {
	var a NamespaceAnswer
	return &a, c.into(ctx, c.newCall(http.MethodGet, nsPath(ns)+"/blacklist", nil), &a)
}

// Configure replaces a namespace's write policy (namespace.configure, admin token).
func (c *Client) Configure(ctx context.Context, ns string, cfg NamespaceConfig) (*NamespaceAnswer, error) {
	k := c.newCall(http.MethodPut, nsPath(ns), nil)
	k.body = cfg
	var a NamespaceAnswer
	return &a, c.into(ctx, k, &a)
}

// AddBlacklistPattern adds an RE2 pattern no value of the namespace may match (blacklist.add).
func (c *Client) AddBlacklistPattern(ctx context.Context, ns, pattern string) (*NamespaceAnswer, error) {
	return c.blacklist(ctx, http.MethodPost, ns, pattern)
}

// RemoveBlacklistPattern removes it (blacklist.remove).
func (c *Client) RemoveBlacklistPattern(ctx context.Context, ns, pattern string) (*NamespaceAnswer, error) {
	return c.blacklist(ctx, http.MethodDelete, ns, pattern)
}

func (c *Client) blacklist(ctx context.Context, method, ns, pattern string) (*NamespaceAnswer, error) {
	k := c.newCall(method, nsPath(ns)+"/blacklist", nil)
	k.body = map[string]string{"pattern": pattern}
	var a NamespaceAnswer
	return &a, c.into(ctx, k, &a)
}

// RequestErasure erases a scope from every store (erasure.request, admin token). The
// answer's Running is set when the saga still runs (202): follow it with Erasure.
func (c *Client) RequestErasure(ctx context.Context, req ErasureRequest) (*Erasure, error) {
	k := c.newCall(http.MethodPost, "/v1/erasures", nil)
	k.body = req
	a, err := c.do(ctx, k)
	if err != nil {
		return nil, err
	}
	var e Erasure
	if err := c.decode(k, a, &e); err != nil {
		return nil, err
	}
	e.Running = a.status == http.StatusAccepted
	return &e, nil
}

// Erasure reads an erasure saga (erasure.get).
func (c *Client) Erasure(ctx context.Context, id string) (*Erasure, error) {
	var e Erasure
	return &e, c.into(ctx, c.newCall(http.MethodGet, "/v1/erasures/"+url.PathEscape(id), nil), &e)
}

// Health reads /v1/health; include names the extra objects (postgres, lag, workers,
// namespaces, erasures, extractions, topic). Only the operator's token gets anything
// beyond Status.
func (c *Client) Health(ctx context.Context, include ...string) (*Health, error) {
	k := c.newCall(http.MethodGet, "/v1/health", nil)
	if len(include) > 0 {
		k.query = url.Values{"include": {strings.Join(include, ",")}}
	}
	var h Health
	return &h, c.into(ctx, k, &h)
}

// Ready reads /v1/health/ready. A process that is not ready answers 503 with the same
// body: Ready returns it with ready false and no error.
func (c *Client) Ready(ctx context.Context) (*Ready, error) {
	k := c.newCall(http.MethodGet, "/v1/health/ready", nil)
	var r Ready
	a, err := c.do(ctx, k)
	if e, ok := AsError(err); ok && e.Status == http.StatusServiceUnavailable && e.Code == "" {
		return &r, c.decode(k, &answer{status: e.Status, body: e.Body}, &r)
	}
	if err != nil {
		return nil, err
	}
	return &r, c.decode(k, a, &r)
}

// Metrics reads /metrics in the Prometheus text format.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	a, err := c.do(ctx, c.newCall(http.MethodGet, "/metrics", nil))
	if err != nil {
		return "", err
	}
	return string(a.body), nil
}

// ResetProjection plans, and with Execute carries out, a projection's consumer group
// offset reset (the deployment operator's token: `loomd token create --operator`).
func (c *Client) ResetProjection(ctx context.Context, name string, req ResetRequest) (*ResetAnswer, error) {
	k := c.newCall(http.MethodPost, "/v1/admin/projections/"+url.PathEscape(name)+":reset", nil)
	k.body = req
	var a ResetAnswer
	return &a, c.into(ctx, k, &a)
}

// Raw sends a request as the client's token and returns the status and body of any
// answer, error answers included: for what the typed methods do not say (a malformed
// body, a route that does not exist). body is sent as is when it is []byte, else as JSON.
func (c *Client) Raw(ctx context.Context, method, path string, body any, opts ...CallOption) (status int, answerBody []byte, err error) {
	k := c.newCall(method, path, opts)
	k.body = body
	a, err := c.do(ctx, k)
	if e, ok := AsError(err); ok {
		return e.Status, e.Body, nil
	}
	if err != nil {
		return 0, nil, err
	}
	return a.status, a.body, nil
}

// ListNamespaces reads one page of the org's namespaces the token reaches, by name
// (namespace.list).
func (c *Client) ListNamespaces(ctx context.Context, o NamespacesOptions) (*NamespacesAnswer, error) {
	k := c.newCall(http.MethodGet, "/v1/namespaces", nil)
	q := url.Values{}
	setPositive(q, "limit", o.Limit)
	setNonEmpty(q, "page_token", o.PageToken)
	k.query = q
	var a NamespacesAnswer
	return &a, c.into(ctx, k, &a)
}

// AuditOptions pages namespace.audit: rows after AfterSeq (0: from the first), at most
// Limit (0: the server's default, 100).
type AuditOptions struct {
	AfterSeq uint64
	Limit    int
}

// AuditRow is one hash-only audit row and the hashes that chain it: RowHash is SHA-256
// over PrevHash and the row's canonical fields. An erasure's scrub empties UserID,
// MemoryKey and ContentSHA256; an erasure's own row has Op "erasure.request".
type AuditRow struct {
	Seq           uint64    `json:"seq"`
	Op            string    `json:"op"`
	EventType     string    `json:"event_type"`
	OccurredAt    time.Time `json:"occurred_at"`
	Actor         string    `json:"actor"`
	Agent         string    `json:"agent"`
	UserID        string    `json:"user_id"`
	SessionID     string    `json:"session_id"`
	MemoryKey     string    `json:"memory_key"`
	MemoryID      string    `json:"memory_id"`
	Version       uint64    `json:"version"`
	ContentSHA256 string    `json:"content_sha256"`
	SourceClass   string    `json:"source_class"`
	Status        string    `json:"status"`
	RequestID     string    `json:"request_id"`
	PrevHash      string    `json:"prev_hash"`
	RowHash       string    `json:"row_hash"`
	// Detail is the account of a write's own row (Op "memory.bulk_set.batch" and the
	// like, or "memory.conflict_resolver"): its members, verdict counts or judged
	// pairs, as JSON; on a judged write's own revision, {"verdict": ...}; absent on
	// other revisions' rows.
	Detail json.RawMessage `json:"detail,omitempty"`
}

// AuditCheckpoint is a namespace's latest checkpoint of its audit chain.
type AuditCheckpoint struct {
	Seq            int64  `json:"seq"`
	RowHash        string `json:"row_hash"`
	CheckpointHash string `json:"checkpoint_hash"`
}

// AuditPage is what namespace.audit answers.
type AuditPage struct {
	Namespace    string           `json:"namespace"`
	Rows         []AuditRow       `json:"rows"`
	NextAfterSeq *uint64          `json:"next_after_seq"`
	Checkpoint   *AuditCheckpoint `json:"checkpoint"`
	Barrier      Barrier          `json:"barrier"`
}

// NamespaceAudit reads a page of the namespace's audit rows with their hashes
// (namespace.audit; an admin token that reaches every user's rows).
func (c *Client) NamespaceAudit(ctx context.Context, ns string, o AuditOptions) (*AuditPage, error) {
	k := c.newCall(http.MethodGet, nsPath(ns)+"/audit", nil)
	q := url.Values{}
	if o.AfterSeq > 0 {
		q.Set("after_seq", strconv.FormatUint(o.AfterSeq, 10))
	}
	setPositive(q, "limit", o.Limit)
	k.query = q
	var a AuditPage
	return &a, c.into(ctx, k, &a)
}

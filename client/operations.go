package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// The operations of a namespace as a whole (snapshot, restore, rollback, the blacklist
// sweep), the bulk reads, proposals and the org's tokens.

// Stream is a bulk read's body (JSON Lines): read it to its end line, then close it.
type Stream struct {
	io.ReadCloser
	// ID is the snapshot's (or the export's) id, as its header line names it.
	ID string
}

// SnapshotNamespace streams namespace.snapshot: the namespace's memories at one generation.
func (c *Client) SnapshotNamespace(ctx context.Context, ns string) (*Stream, error) {
	return c.stream(ctx, c.newCall(http.MethodPost, nsPath(ns)+":snapshot", nil))
}

// Export streams erasure.export: every memory of userID across the org, with every
// version (an admin's call).
func (c *Client) Export(ctx context.Context, userID string) (*Stream, error) {
	k := c.newCall(http.MethodGet, "/v1/exports", nil)
	k.query = url.Values{"user_id": {userID}}
	return c.stream(ctx, k)
}

// stream sends k and hands back the body of a 2xx answer unread. The transport
// decompresses a gzip answer it asked for.
func (c *Client) stream(ctx context.Context, k *call) (*Stream, error) {
	req, err := http.NewRequestWithContext(ctx, k.method, c.base+k.path+queryOf(k.query), nil)
	if err != nil {
		return nil, fmt.Errorf("loom client: %s %s: %w", k.method, k.path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("loom client: %s %s: %w", k.method, k.path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return nil, errorFrom(resp.StatusCode, resp.Header, b)
	}
	return &Stream{ReadCloser: resp.Body, ID: resp.Header.Get("X-Loom-Stream-Id")}, nil
}

func queryOf(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// ReadLines reads a JSON Lines payload (a snapshot or an export), calling fn with each
// line's kind and the line itself. It does not check the end line's digest: a
// restore does.
func ReadLines(r io.Reader, fn func(kind string, line json.RawMessage) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var k struct {
			Kind string `json:"kind"`
		}
		line := json.RawMessage(append([]byte(nil), sc.Bytes()...))
		if err := json.Unmarshal(line, &k); err != nil {
			return fmt.Errorf("loom client: a line is not JSON: %w", err)
		}
		if err := fn(k.Kind, line); err != nil {
			return err
		}
	}
	return sc.Err()
}

// RestoreNamespace writes a snapshot payload into a namespace, created when missing
// (namespace.restore, admin token). Idempotent per snapshot: a retry answers Replayed.
func (c *Client) RestoreNamespace(ctx context.Context, ns string, payload []byte) (*RestoreAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+":restore", nil)
	k.body, k.contentType = payload, "application/x-ndjson" // the snapshot's JSON Lines, as the spec names them
	var a RestoreAnswer
	return &a, c.into(ctx, k, &a)
}

// RollbackNamespace plans, and with DryRun false carries out, namespace.rollback to AsOf.
func (c *Client) RollbackNamespace(ctx context.Context, ns string, req RollbackRequest) (*RollbackAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+":rollback", nil)
	k.body = req
	var a RollbackAnswer
	return &a, c.into(ctx, k, &a)
}

// BulkGet reads many memories by key or id in one call (memory.bulk_get).
func (c *Client) BulkGet(ctx context.Context, ns string, req BulkGetRequest) (*BulkGetAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/memories:bulkGet", nil)
	k.body = req
	var a BulkGetAnswer
	return &a, c.into(ctx, k, &a)
}

// SweepBlacklist tombstones the namespace's memories its blacklist matches (one
// pattern of it, or every pattern when pattern is empty; admin token).
func (c *Client) SweepBlacklist(ctx context.Context, ns, pattern string) (*SweepReport, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/blacklist:sweep", nil)
	if pattern != "" {
		k.body = map[string]string{"pattern": pattern}
	}
	var a SweepReport
	return &a, c.into(ctx, k, &a)
}

// AcceptProposal states a proposal as the fact, through memory.set's verdict
// (memory.proposal_decide).
func (c *Client) AcceptProposal(ctx context.Context, ns, key string, id Identity, opts ...CallOption) (*SetAnswer, error) {
	k := c.newCall(http.MethodPost, keyPath(ns, key)+":decide", opts)
	k.body = decideBody{Decision: "accept", Identity: id}
	var a SetAnswer
	return &a, c.write(ctx, k, &a)
}

// RejectProposal marks a proposal rejected (memory.proposal_decide).
func (c *Client) RejectProposal(ctx context.Context, ns, key string, id Identity, opts ...CallOption) (*CopyAnswer, error) {
	k := c.newCall(http.MethodPost, keyPath(ns, key)+":decide", opts)
	k.body = decideBody{Decision: "reject", Identity: id}
	var a CopyAnswer
	return &a, c.write(ctx, k, &a)
}

type decideBody struct {
	Decision string `json:"decision"`
	Identity
}

// CreateToken creates a token of the caller's org (admin token reaching the whole org).
// The answer holds its secret, shown this once.
func (c *Client) CreateToken(ctx context.Context, req TokenRequest) (*CreatedToken, error) {
	k := c.newCall(http.MethodPost, "/v1/admin/tokens", nil)
	k.body = req
	var a CreatedToken
	return &a, c.into(ctx, k, &a)
}

// Tokens lists the org's tokens, never their secrets.
func (c *Client) Tokens(ctx context.Context) (*TokenList, error) {
	var a TokenList
	return &a, c.into(ctx, c.newCall(http.MethodGet, "/v1/admin/tokens", nil), &a)
}

// RevokeToken revokes a token of the org; every process refuses it within the list's
// CacheTTLMS.
func (c *Client) RevokeToken(ctx context.Context, id string) (*TokenInfo, error) {
	var a TokenInfo
	return &a, c.into(ctx, c.newCall(http.MethodDelete, "/v1/admin/tokens/"+url.PathEscape(id), nil), &a)
}

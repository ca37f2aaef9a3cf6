package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Set writes a key's value (memory.set: PUT /v1/namespaces/{ns}/memories/{key}).
func (c *Client) Set(ctx context.Context, ns, key string, req SetRequest, opts ...CallOption) (*SetAnswer, error) {
	k := c.newCall(http.MethodPut, keyPath(ns, key), opts)
	k.body = req
	var a SetAnswer
	return &a, c.write(ctx, k, &a)
}

// Get reads a key's live head (memory.get), or with asOf non-zero its version then.
func (c *Client) Get(ctx context.Context, ns, key string, id Identity, asOf time.Time) (*Memory, error) {
	k := c.newCall(http.MethodGet, keyPath(ns, key), nil)
	k.query = id.query(nil)
	if !asOf.IsZero() {
		k.query.Set("as_of", asOf.Format(time.RFC3339Nano))
	}
	var m Memory
	return &m, c.into(ctx, k, &m)
}

// Update revises a key's live head in place (memory.update: PATCH).
func (c *Client) Update(ctx context.Context, ns, key string, req UpdateRequest, opts ...CallOption) (*SetAnswer, error) {
	k := c.newCall(http.MethodPatch, keyPath(ns, key), opts)
	k.body = req
	var a SetAnswer
	return &a, c.write(ctx, k, &a)
}

// Delete tombstones a key's live head (memory.delete), or with version non-empty only
// while the head is still that version (memory.delete_version: the answer is then
// VersionChanged when the key has moved on).
func (c *Client) Delete(ctx context.Context, ns, key string, id Identity, version string, opts ...CallOption) (*CopyAnswer, error) {
	k := c.newCall(http.MethodDelete, keyPath(ns, key), opts)
	k.query = id.query(nil)
	if version != "" {
		k.query.Set("version", version)
	}
	var a CopyAnswer
	return &a, c.write(ctx, k, &a)
}

// The copy writers: POST /v1/namespaces/{ns}/memories/{key}:{method}.

// Pin pins a key's live head (memory.pin).
func (c *Client) Pin(ctx context.Context, ns, key string, id Identity, opts ...CallOption) (*CopyAnswer, error) {
	return c.copyWriter(ctx, ns, key, "pin", id, opts)
}

// Unpin unpins it (memory.unpin).
func (c *Client) Unpin(ctx context.Context, ns, key string, id Identity, opts ...CallOption) (*CopyAnswer, error) {
	return c.copyWriter(ctx, ns, key, "unpin", id, opts)
}

// Lock locks it (memory.lock).
func (c *Client) Lock(ctx context.Context, ns, key string, id Identity, opts ...CallOption) (*CopyAnswer, error) {
	return c.copyWriter(ctx, ns, key, "lock", id, opts)
}

// Unlock unlocks it (memory.unlock).
func (c *Client) Unlock(ctx context.Context, ns, key string, id Identity, opts ...CallOption) (*CopyAnswer, error) {
	return c.copyWriter(ctx, ns, key, "unlock", id, opts)
}

// Reject rejects it (memory.reject).
func (c *Client) Reject(ctx context.Context, ns, key string, id Identity, opts ...CallOption) (*CopyAnswer, error) {
	return c.copyWriter(ctx, ns, key, "reject", id, opts)
}

// Verify marks it verified (memory.verify).
func (c *Client) Verify(ctx context.Context, ns, key string, id Identity, opts ...CallOption) (*CopyAnswer, error) {
	return c.copyWriter(ctx, ns, key, "verify", id, opts)
}

// Restore undoes a delete, a supersession or a rejection (memory.restore).
func (c *Client) Restore(ctx context.Context, ns, key string, id Identity, opts ...CallOption) (*CopyAnswer, error) {
	return c.copyWriter(ctx, ns, key, "restore", id, opts)
}

// Unsupersede undoes a retirement, the conflict resolver's or a write's
// (memory.unsupersede): the row is restored and the resolver leaves the pair alone
// while both rows hold the values they hold now.
func (c *Client) Unsupersede(ctx context.Context, ns, key string, id Identity, opts ...CallOption) (*CopyAnswer, error) {
	return c.copyWriter(ctx, ns, key, "unsupersede", id, opts)
}

func (c *Client) copyWriter(ctx context.Context, ns, key, method string, id Identity, opts []CallOption) (*CopyAnswer, error) {
	k := c.newCall(http.MethodPost, keyPath(ns, key)+":"+method, opts)
	k.body = id
	var a CopyAnswer
	return &a, c.write(ctx, k, &a)
}

// Redact scrubs one historical version's text for good (memory.redact).
func (c *Client) Redact(ctx context.Context, ns, key string, req RedactRequest, opts ...CallOption) (*RedactAnswer, error) {
	k := c.newCall(http.MethodPost, keyPath(ns, key)+":redact", opts)
	k.body = req
	var a RedactAnswer
	return &a, c.write(ctx, k, &a)
}

// VerifyByID records that the memory with this id was verified (memory.verify by
// id): the one live head of the org the token reaches, else 404.
func (c *Client) VerifyByID(ctx context.Context, id string, opts ...CallOption) (*CopyAnswer, error) {
	k := c.newCall(http.MethodPost, "/v1/memories/"+url.PathEscape(id)+":verify", opts)
	var a CopyAnswer
	return &a, c.write(ctx, k, &a)
}

// RedactByID scrubs one version of the memory with this id (memory.redact by id);
// version is the version_text. The identity is the id's.
func (c *Client) RedactByID(ctx context.Context, id, version string, opts ...CallOption) (*RedactAnswer, error) {
	k := c.newCall(http.MethodPost, "/v1/memories/"+url.PathEscape(id)+":redact", opts)
	k.body = map[string]string{"version": version}
	var a RedactAnswer
	return &a, c.write(ctx, k, &a)
}

// History reads every version of a key, oldest first (memory.history).
func (c *Client) History(ctx context.Context, ns, key string, id Identity) (*HistoryAnswer, error) {
	k := c.newCall(http.MethodGet, keyPath(ns, key)+"/history", nil)
	k.query = id.query(nil)
	var a HistoryAnswer
	return &a, c.into(ctx, k, &a)
}

// GetByID reads the one live head the token reaches that holds id (memory.get_by_id).
func (c *Client) GetByID(ctx context.Context, id string) (*Memory, error) {
	k := c.newCall(http.MethodGet, "/v1/memories/"+url.PathEscape(id), nil)
	var m Memory
	return &m, c.into(ctx, k, &m)
}

// UpdateByID revises the one live head id names (memory.update_by_id); req's identity
// must be empty.
func (c *Client) UpdateByID(ctx context.Context, id string, req UpdateRequest, opts ...CallOption) (*SetAnswer, error) {
	k := c.newCall(http.MethodPatch, "/v1/memories/"+url.PathEscape(id), opts)
	k.body = req
	var a SetAnswer
	return &a, c.write(ctx, k, &a)
}

// Search ranks a namespace's memories against a query (memory.search).
func (c *Client) Search(ctx context.Context, ns string, req SearchRequest) (*SearchAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/memories:search", nil)
	k.body = req
	var a SearchAnswer
	return &a, c.into(ctx, k, &a)
}

// SearchTrace reads a kept search trace (memory.search_trace).
func (c *Client) SearchTrace(ctx context.Context, traceID string) (*SearchTrace, error) {
	var a SearchTrace
	return &a, c.into(ctx, c.newCall(http.MethodGet, "/v1/search-traces/"+url.PathEscape(traceID), nil), &a)
}

// List reads one page of a namespace's memories (memory.list).
func (c *Client) List(ctx context.Context, ns string, o ListOptions) (*ListAnswer, error) {
	k := c.newCall(http.MethodGet, nsPath(ns)+"/memories", nil)
	q := o.Identity.query(nil)
	setNonEmpty(q, "order", o.Order)
	setPositive(q, "limit", o.Limit)
	setNonEmpty(q, "page_token", o.PageToken)
	setNonEmpty(q, "memory_type", o.MemoryType)
	setNonEmpty(q, "tags", strings.Join(o.Tags, ","))
	setNonEmpty(q, "tags_mode", o.TagsMode)
	setNonEmpty(q, "status", strings.Join(o.Status, ","))
	if o.IncludeSuperseded {
		q.Set("include_superseded", "true")
	}
	if o.IncludeTombstoned {
		q.Set("include_tombstoned", "true")
	}
	if !o.AsOf.IsZero() {
		q.Set("as_of", o.AsOf.Format(time.RFC3339Nano))
	}
	k.query = q
	var a ListAnswer
	return &a, c.into(ctx, k, &a)
}

// Keys reads one page of the keys live rows hold in a namespace (memory.keys).
func (c *Client) Keys(ctx context.Context, ns string, o KeysOptions) (*KeysAnswer, error) {
	k := c.newCall(http.MethodGet, nsPath(ns)+"/keys", nil)
	q := o.Identity.query(nil)
	setNonEmpty(q, "prefix", o.Prefix)
	setPositive(q, "limit", o.Limit)
	setNonEmpty(q, "page_token", o.PageToken)
	setNonEmpty(q, "memory_type", o.MemoryType)
	setNonEmpty(q, "tags", strings.Join(o.Tags, ","))
	setNonEmpty(q, "status", strings.Join(o.Status, ","))
	k.query = q
	var a KeysAnswer
	return &a, c.into(ctx, k, &a)
}

// Clear tombstones every memory of a namespace, or of the scope req names (memory.clear).
func (c *Client) Clear(ctx context.Context, ns string, req ClearRequest, opts ...CallOption) (*ClearAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/memories:clear", opts)
	k.body = req
	var a ClearAnswer
	return &a, c.write(ctx, k, &a)
}

// BulkSet writes up to 1000 entries in one admission (memory.bulk_set).
func (c *Client) BulkSet(ctx context.Context, ns string, req BulkSetRequest, opts ...CallOption) (*BulkAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/memories:bulkSet", opts)
	k.body = req
	var a BulkAnswer
	return &a, c.write(ctx, k, &a)
}

// SweepExpired applies on_expire to a namespace's expired memories now (admin token).
func (c *Client) SweepExpired(ctx context.Context, ns string) (*SweepExpiredAnswer, error) {
	k := c.newCall(http.MethodPost, nsPath(ns)+"/memories:sweepExpired", nil)
	var a SweepExpiredAnswer
	return &a, c.into(ctx, k, &a)
}

// Entity reads an entity of the graph, its facts and its edges (graph.entity).
func (c *Client) Entity(ctx context.Context, ns, name string, o EntityOptions) (*EntityAnswer, error) {
	k := c.newCall(http.MethodGet, nsPath(ns)+"/graph/entities/"+url.PathEscape(name), nil)
	q := url.Values{}
	if !o.AsOf.IsZero() {
		q.Set("as_of", o.AsOf.Format(time.RFC3339Nano))
	}
	if o.IncludeClosed {
		q.Set("include_closed", "true")
	}
	setPositive(q, "edges", o.Edges)
	k.query = q
	var a EntityAnswer
	return &a, c.into(ctx, k, &a)
}

func setNonEmpty(q url.Values, name, v string) {
	if v != "" {
		q.Set(name, v)
	}
}

func setPositive(q url.Values, name string, v int) {
	if v > 0 {
		q.Set(name, strconv.Itoa(v))
	}
}

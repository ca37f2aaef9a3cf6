package query

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

const (
	listLimitDefault = 50
	listLimitMax     = 500
	// sortSep joins a row's identity into one string that sorts as the tuple does.
	sortSep = "\x01"
)

// listCursor is where the next page of a list starts; it travels as page_token.
type listCursor struct {
	Order   string `json:"o"`
	Version uint64 `json:"v,omitempty"` // newest: the last version served
	Key     string `json:"k,omitempty"` // key: the last sort key served
}

func (c listCursor) token() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseCursor(token, order string) (listCursor, error) {
	if token == "" {
		return listCursor{Order: order}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	var c listCursor
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.Order != order {
		return c, httperr.Validation("page_token", "not a page token of this list's order")
	}
	return c, nil
}

// listQuery is a list's query string, as the request sent it.
type listQuery struct {
	agent, userID, sessionID string
	memoryType               string
	tags, tagsMode, status   string
	includeSuperseded        string
	includeTombstoned        string
	asOf                     string
	limit, pageToken         string
}

// listCall is a memory.list (in order) or a memory.keys (under prefix) of a namespace.
type listCall struct {
	namespace string
	order     string
	prefix    string
	q         listQuery
}

// listFilter checks a list's filters.
func listFilter(q listQuery, p auth.Principal) (filter, int, error) {
	switch q.tagsMode {
	case "", "all", "any":
	default:
		return filter{}, 0, httperr.Validation("tags_mode", "tags_mode must be all or any")
	}
	includeSuperseded := false
	if q.includeSuperseded != "" {
		var err error
		if includeSuperseded, err = strconv.ParseBool(q.includeSuperseded); err != nil {
			return filter{}, 0, httperr.Validation("include_superseded", "include_superseded must be true or false")
		}
	}
	f := filter{org: p.Org, agent: q.agent, userID: q.userID, sessionID: q.sessionID,
		memoryType: q.memoryType, tagsAny: q.tagsMode == "any", statuses: append([]memrow.Status(nil), defaultStatuses...)}
	if q.tags != "" {
		f.tags = strings.Split(q.tags, ",")
		if err := memrow.ValidateTags(f.tags); err != nil {
			return f, 0, err
		}
	}
	if q.status != "" {
		f.statuses = nil
		for _, s := range strings.Split(q.status, ",") {
			switch s := memrow.Status(s); s {
			case memrow.StatusActive, memrow.StatusConflicted, memrow.StatusSuperseded, memrow.StatusDuplicate, memrow.StatusProposed, memrow.StatusRejected:
				f.statuses = append(f.statuses, s)
			default:
				return f, 0, httperr.Validation("status", "status may hold active, conflicted, superseded, duplicate, proposed or rejected")
			}
		}
	}
	if includeSuperseded {
		f.statuses = append(f.statuses, memrow.StatusSuperseded)
	}
	switch q.includeTombstoned {
	case "", "false":
	case "true":
		if q.asOf != "" {
			return f, 0, httperr.Validation("include_tombstoned", "a recovery listing reads the current heads: it takes no as_of")
		}
		f.withDeleted = true
	default:
		return f, 0, httperr.Validation("include_tombstoned", "include_tombstoned must be true or false")
	}
	for _, v := range []struct{ name, v string }{{"agent", f.agent}, {"user_id", f.userID}, {"session_id", f.sessionID}} {
		if v.v != "" {
			if err := memrow.ValidateIdentity(v.name, v.v); err != nil {
				return f, 0, err
			}
		}
	}
	f.userID = scopedUser(p, f.userID)
	f.sessionID = scopedSession(p, f.sessionID)
	limit := listLimitDefault
	if q.limit != "" {
		n, err := strconv.Atoi(q.limit)
		if err != nil || n < 1 || n > listLimitMax {
			return f, 0, httperr.Validation("limit", fmt.Sprintf("limit must be between 1 and %d", listLimitMax))
		}
		limit = n
	}
	return f, limit, nil
}

// listRead is a list request settled: checked, filtered, and past the barrier.
type listRead struct {
	f      filter
	limit  int
	cur    listCursor
	passed Passed
}

// settleList checks a list request (its namespace, filters and page token of order)
// and waits at the barrier for the writes committed before it.
func (s *Service) settleList(ctx context.Context, p auth.Principal, r listCall, order string) (*listRead, error) {
	if err := p.Namespace(r.namespace); err != nil {
		return nil, err
	}
	lr := &listRead{}
	var err error
	if lr.f, lr.limit, err = listFilter(r.q, p); err != nil {
		return nil, err
	}
	if lr.cur, err = parseCursor(r.q.pageToken, order); err != nil {
		return nil, err
	}
	if lr.passed, err = s.barrier.Wait(ctx, p.Org, []string{r.namespace}); err != nil {
		return nil, err
	}
	return lr, nil
}

// listAnswer is what memory.list answers.
type listAnswer struct {
	Barrier       Passed       `json:"barrier"`
	Memories      []memoryView `json:"memories"`
	NextPageToken string       `json:"next_page_token,omitempty"`
}

// list is memory.list: the namespace's memories newest first (order=newest, the
// default) or by key (order=key), filtered and paged, from ClickHouse behind the
// barrier. A row is served only while it is its key's live head in Postgres at the
// version listed, so a delete, a rewrite or a redaction ClickHouse has not published
// yet is not read back.
func (s *Service) list(ctx context.Context, p auth.Principal, r listCall) (*listAnswer, error) {
	order := r.order
	if order != "newest" && order != "key" {
		return nil, httperr.Validation("order", "order must be newest or key")
	}
	var at time.Time
	if r.q.asOf != "" {
		var err error
		if at, err = parseAsOf(r.q.asOf); err != nil {
			return nil, err
		}
	}
	lr, err := s.settleList(ctx, p, r, order)
	if err != nil {
		return nil, err
	}
	if r.q.asOf != "" {
		return s.listAsOf(ctx, r.namespace, lr, order, at)
	}
	ns, f, limit, cur := r.namespace, lr.f, lr.limit, lr.cur
	pre, where, args := f.where(ns, true)
	where, args, orderBy := pageOf(where, args, order, cur)
	q := fmt.Sprintf(`SELECT agent, user_id, session_id, memory_key, version, %s AS sk FROM loom.memory FINAL
		PREWHERE %s WHERE %s ORDER BY %s LIMIT ?`, listSortKey, pre, where, orderBy)
	rows, err := s.ch.Query(s.ch.Ctx(ctx), q, append(args, limit+1)...)
	if err != nil {
		return nil, chUnavailable("listing memories", err)
	}
	type listed struct {
		id      memrow.Identity
		version uint64
		sk      string
	}
	var found []listed
	for rows.Next() {
		l := listed{id: memrow.Identity{Org: p.Org, Namespace: ns}}
		if err := rows.Scan(&l.id.Agent, &l.id.UserID, &l.id.SessionID, &l.id.MemoryKey, &l.version, &l.sk); err != nil {
			rows.Close()
			return nil, chUnavailable("listing memories", err)
		}
		found = append(found, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, chUnavailable("listing memories", err)
	}
	more := len(found) > limit
	if more {
		found = found[:limit]
	}
	ids := make([]memrow.Identity, len(found))
	for i, l := range found {
		ids[i] = l.id
	}
	current := map[string]*memrow.Row{}
	if len(ids) > 0 {
		if current, err = heads.Many(ctx, s.pool, p.Org, ns, ids); err != nil {
			return nil, httperr.Store("reading the listed rows' heads", err)
		}
	}
	now := s.now()
	out := []memoryView{}
	for _, l := range found {
		h := current[heads.IdentityKey(l.id)]
		if h == nil || !listServes(h, l.version, f.withDeleted, now) {
			continue
		}
		out = append(out, viewOf(h))
	}
	ans := &listAnswer{Memories: out, Barrier: lr.passed}
	if more && len(found) > 0 {
		last := found[len(found)-1]
		ans.NextPageToken = listCursor{Order: order, Version: last.version, Key: last.sk}.token()
	}
	return ans, nil
}

// listSortKey joins a row's identity into one string that sorts as the tuple does.
const listSortKey = "concat(memory_key, '" + sortSep + "', agent, '" + sortSep + "', user_id, '" + sortSep + "', session_id)"

// pageOf narrows a list's predicate to the page after cur, and orders it.
func pageOf(where string, args []any, order string, cur listCursor) (string, []any, string) {
	if order == "key" {
		if cur.Key != "" {
			where += " AND " + listSortKey + " > ?"
			args = append(args, cur.Key)
		}
		return where, args, listSortKey
	}
	if cur.Version > 0 {
		where += " AND version < ?"
		args = append(args, cur.Version)
	}
	return where, args, "version DESC"
}

// listServes reports whether a listing serves the head h of a row ClickHouse listed at
// version: while it is that live version; a recovery listing also serves a deleted
// head at or above it (a delete copies the row it deletes, so the listing's filters
// held for it).
func listServes(h *memrow.Row, version uint64, withDeleted bool, now time.Time) bool {
	if withDeleted && h.Tombstone {
		return uint64(h.Version) >= version
	}
	return uint64(h.Version) == version && h.Live(now)
}

// keysAnswer is what memory.keys answers: each key with how many identities hold it.
type keysAnswer struct {
	Barrier       Passed    `json:"barrier"`
	Keys          []keyView `json:"keys"`
	NextPageToken string    `json:"next_page_token,omitempty"`
}

type keyView struct {
	MemoryKey string `json:"memory_key"`
	Rows      uint64 `json:"rows"`
}

// keys is memory.keys: the namespace's keys held by live rows, by key, with how many
// identities hold each, from ClickHouse behind the barrier, so a key written before the
// request is listed. Rows are not checked against the heads: a key is a count, not a
// served value, and a delete ClickHouse has not published leaves it counted at most
// until the projector catches up.
func (s *Service) keys(ctx context.Context, p auth.Principal, r listCall) (*keysAnswer, error) {
	r.q.includeTombstoned, r.q.asOf = "", "" // a count of live keys, now
	lr, err := s.settleList(ctx, p, r, "keys")
	if err != nil {
		return nil, err
	}
	ns, f, limit, cur := r.namespace, lr.f, lr.limit, lr.cur
	pre, where, args := f.where(ns, true)
	if prefix := r.prefix; prefix != "" {
		where += " AND startsWith(memory_key, ?)"
		args = append(args, prefix)
	}
	if cur.Key != "" {
		where += " AND memory_key > ?"
		args = append(args, cur.Key)
	}
	q := fmt.Sprintf(`SELECT memory_key, count() FROM loom.memory FINAL PREWHERE %s WHERE %s
		GROUP BY memory_key ORDER BY memory_key LIMIT ?`, pre, where)
	rows, err := s.ch.Query(s.ch.Ctx(ctx), q, append(args, limit+1)...)
	if err != nil {
		return nil, chUnavailable("listing keys", err)
	}
	defer rows.Close()
	keys := []keyView{}
	for rows.Next() {
		var k keyView
		if err := rows.Scan(&k.MemoryKey, &k.Rows); err != nil {
			return nil, chUnavailable("listing keys", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, chUnavailable("listing keys", err)
	}
	ans := &keysAnswer{Keys: keys, Barrier: lr.passed}
	if len(keys) > limit {
		ans.Keys = keys[:limit]
		ans.NextPageToken = listCursor{Order: "keys", Key: ans.Keys[limit-1].MemoryKey}.token()
	}
	return ans, nil
}

package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/config"
)

// OrgAPI serves the command and query roles (configured by mod, built with opts) for
// a fresh org, and returns the process and an admin client of the org.
func (e *Env) OrgAPI(t testing.TB, mod func(*config.Config), opts ...app.Option) (*app.Process, *Client, string) {
	t.Helper()
	n, url := e.API(t, mod, opts...)
	org := Unique(t, "org")
	return n, NewClient(url, e.Token(t, n, auth.NewToken{Org: org})), org
}

// Put writes a memory with a full memory.set body (value, user_id, tags, ...) and
// returns the answer, whatever its status.
func (c *Client) Put(t testing.TB, ns, key string, body map[string]any) *Response {
	t.Helper()
	b, _ := json.Marshal(body)
	return c.Do(t, http.MethodPut, "/v1/namespaces/"+ns+"/memories/"+key, b)
}

// Try sends a request from a goroutine other than the test's: it answers the status,
// or the transport error, instead of failing the test.
func (c *Client) Try(method, path string, body any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequest(method, c.URL+path, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// Erase requests an erasure and waits until its saga finished (following a 202
// with GET /v1/erasures/{id}); it fails the test unless the saga completed.
func (c *Client) Erase(t testing.TB, scope map[string]any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(scope)
	r := c.Do(t, http.MethodPost, "/v1/erasures", b)
	if r.Status != http.StatusOK && r.Status != http.StatusAccepted {
		t.Fatalf("erasure %s: %d %s", b, r.Status, r.Body)
	}
	return c.AwaitErasure(t, r.JSON(t)["id"].(string), 90*time.Second)
}

// AwaitErasure follows an erasure until it is no longer running, within limit, and
// fails the test unless it completed.
func (c *Client) AwaitErasure(t testing.TB, id string, limit time.Duration) map[string]any {
	t.Helper()
	var view map[string]any
	Eventually(t, limit, "erasure "+id+" to finish", func() bool {
		r := c.Do(t, http.MethodGet, "/v1/erasures/"+id, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("GET erasure %s: %d %s", id, r.Status, r.Body)
		}
		view = r.JSON(t)
		return view["status"] != "running"
	})
	if view["status"] != "completed" {
		t.Fatalf("erasure %s ended %v: %v", id, view["status"], view)
	}
	return view
}

// ScopeRows counts, per table of both stores, the rows of a user's memories in a
// namespace (every user's when userID is empty) at or below seq (all when seq is 0);
// the audit log counts only the rows that still hold a key.
func ScopeRows(t testing.TB, pool *pgxpool.Pool, conn *ch.Conn, org, ns, userID string, seq int64) map[string]int64 {
	t.Helper()
	if seq == 0 {
		seq = 1 << 62
	}
	out := map[string]int64{}
	for _, table := range []string{"memory_current", "memory_revisions"} {
		out["pg:"+table] = Int(t, pool, fmt.Sprintf(`SELECT count(*) FROM loom.%s WHERE org = $1 AND namespace = $2
			AND ($3 = '' OR user_id = (SELECT loom.user_ref($1, $3))) AND seq <= $4`, table), org, ns, userID, seq)
	}
	for _, table := range ProjectionTables {
		if table == "entity_triples" || table == "entity_edges" {
			// Shared facts and edges carry no user: a user's part of them is checked by
			// the graph's own erasure test.
			if userID != "" {
				continue
			}
			n := uint64(0)
			err := conn.QueryRow(context.Background(), fmt.Sprintf(`SELECT count() FROM loom.%s WHERE org = ? AND namespace = ? AND seq <= ?`, table),
				org, ns, uint64(seq)).Scan(&n)
			if err != nil {
				t.Fatalf("count %s: %v", table, err)
			}
			out["ch:"+table] = int64(n)
			continue
		}
		q := fmt.Sprintf(`SELECT count() FROM loom.%s WHERE org = ? AND namespace = ? AND (? = '' OR user_id = ?) AND seq <= ?`, table)
		if table == "audit_log" {
			q += " AND memory_key != ''"
		}
		var n uint64
		if err := conn.QueryRow(context.Background(), q, org, ns, userID, userID, uint64(seq)).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out["ch:"+table] = int64(n)
	}
	return out
}

// Leaks lists the needles some record carries anywhere: its key, its value or a
// header.
func Leaks(records []*kgo.Record, needles ...string) []string {
	var out []string
	for _, n := range needles {
		for _, r := range records {
			found := bytes.Contains(r.Key, []byte(n)) || bytes.Contains(r.Value, []byte(n))
			for _, h := range r.Headers {
				found = found || bytes.Contains(h.Value, []byte(n)) || bytes.Contains([]byte(h.Key), []byte(n))
			}
			if found {
				out = append(out, fmt.Sprintf("%q at %d/%d", n, r.Partition, r.Offset))
				break
			}
		}
	}
	return out
}

// TextRows counts, per ClickHouse table, the rows of a namespace that hold word
// anywhere a memory's text goes: a value, a key, a tag, an index term, a window.
func TextRows(t testing.TB, conn *ch.Conn, org, ns, word string) map[string]int64 {
	t.Helper()
	fields := map[string][]string{
		"memory":            {"value", "memory_key", "arrayStringConcat(tags, ' ')", "arrayStringConcat(entities, ' ')"},
		"memory_versions":   {"value", "memory_key", "arrayStringConcat(tags, ' ')", "arrayStringConcat(entities, ' ')"},
		"memory_embeddings": {"memory_key", "arrayStringConcat(tags, ' ')"},
		"memory_lexical":    {"memory_key", "arrayStringConcat(tags, ' ')", "arrayStringConcat(terms, ' ')", "arrayStringConcat(key_terms, ' ')"},
		"memory_chunks":     {"memory_key", "text"},
		"audit_log":         {"memory_key"},
	}
	return rowsHolding(t, conn, org, ns, word, fields)
}

// rowsHolding counts, per table, the rows of org/ns in which any of the table's
// expressions holds word.
func rowsHolding(t testing.TB, conn *ch.Conn, org, ns, word string, fields map[string][]string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for table, exprs := range fields {
		var preds []string
		args := []any{org, ns}
		for _, e := range exprs {
			preds = append(preds, "position("+e+", ?) > 0")
			args = append(args, word)
		}
		q := fmt.Sprintf("SELECT count() FROM loom.%s WHERE org = ? AND namespace = ? AND (%s)", table, strings.Join(preds, " OR "))
		var n uint64
		if err := conn.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out[table] = int64(n)
	}
	return out
}

// UserRef is how the topic names userID in org (events.UserRef under the org's key).
func UserRef(t testing.TB, pool *pgxpool.Pool, org, userID string) string {
	t.Helper()
	var key []byte
	if err := pool.QueryRow(context.Background(), `SELECT loom.unwrapped_key(key) FROM loom.user_ref_keys WHERE org = $1`, org).Scan(&key); err != nil {
		t.Fatalf("read the user reference key of %s: %v", org, err)
	}
	ref, err := events.UserRef(key, userID)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// GraphRows counts, per graph table, the rows of org/ns that hold word in an entity
// name, a spelling or a fact's object (the graph keeps names in canonical form:
// lower case).
func GraphRows(t testing.TB, conn *ch.Conn, org, ns, word string) map[string]int64 {
	t.Helper()
	fields := map[string][]string{
		"entities":           {"name", "alias"},
		"entity_sightings":   {"name", "alias"},
		"entity_triples":     {"subject", "object"},
		"entity_triple_rows": {"subject", "object"},
		"entity_edges":       {"entity_a", "entity_b"},
		"entity_edge_rows":   {"entity_a", "entity_b"},
	}
	return rowsHolding(t, conn, org, ns, word, fields)
}

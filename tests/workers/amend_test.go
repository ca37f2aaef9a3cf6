package workers

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/llm/llmtest"
	pgmigrations "github.com/loomplane/loom/schemas/postgres"
	"github.com/loomplane/loom/tests/testenv"
)

// scriptExtraction answers the entity extractor with one entity for any row, and
// memory.set_from_messages with one fact.
func scriptExtraction(srv *llmtest.Server) {
	srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		switch r.SchemaName {
		case "entity_extraction":
			return llmtest.JSON(map[string]any{"entities": []scriptedEntity{{"Alice", "person", []string{}}, {"Lisbon", "place", []string{}}},
				"relations": []scriptedRelation{{"Alice", "lives_in", "Lisbon"}}})
		case "extracted_facts":
			return llmtest.JSON(map[string]any{"facts": []any{map[string]any{"key": "user.home_city", "value": "Alice lives in Lisbon",
				"message_index": 0, "tags": []any{}, "about": "user"}}, "forget": []any{}})
		}
		return llmtest.Status(500, "unscripted")
	})
}

func noExtractionQueue(c *config.Config) { c.Command.Extraction.QueueEnabled = false }

// bearer adds a token to every request of the go-sdk's HTTP transport.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// Extraction from a conversation works in a namespace whose rows the entity extractor
// amended, untagged and tagged: memory.set_from_messages, mem0's add with inference and
// MCP's memory_from_messages each answer their facts (they read the namespace's tags,
// which failed with a 500 on a head stored with "tags": null). A head stored so by an
// earlier build is read as untagged, and migration 058 repairs it.
func TestExtractionOverRowsTheEntityExtractorAmended(t *testing.T) {
	const org = "amended-tags"
	w := startWorkers(t, org, []string{entitiesWorker}, noExtractionQueue)
	scriptExtraction(w.srv)
	ctx := context.Background()
	pool := env.PG(t)
	ns := testenv.Unique(t, "tags")
	set(t, w.tc, ns, "untagged", "Alice hikes on Sundays", client.Identity{})
	if _, err := w.tc.Set(ctx, ns, "tagged", client.SetRequest{Value: "Alice reads novels", Tags: []string{"hobby"}}); err != nil {
		t.Fatal(err)
	}
	drained(t, pool, entitiesWorker, org)
	if m := get(t, w.tc, ns, "untagged", client.Identity{}); !slices.Contains(m.Entities, "Alice") {
		t.Fatalf("the untagged row's entities %v; want the extractor's Alice", m.Entities)
	}
	tagsOf := func() string {
		return strings.Join(testenv.PGStrings(t, pool, `SELECT coalesce(jsonb_typeof(`+heads.Row+` -> 'tags'), 'absent') FROM loom.memory_current
			WHERE org = $1 AND namespace = $2 AND memory_key = (SELECT loom.key_ref($1, 'untagged'))`, org, ns), ",")
	}
	fromMessages := func(what string) {
		t.Helper()
		a, err := w.tc.FromMessages(ctx, ns, client.FromMessagesRequest{Messages: []client.Message{{Role: "user", Content: "I live in Lisbon."}}})
		if err != nil || len(a.Facts) != 1 {
			t.Fatalf("memory.set_from_messages %s: %+v, %v", what, a, err)
		}
	}
	fromMessages("over amended rows")

	body, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": "I live in Lisbon."}},
		"user_id": "alice", "app_id": ns})
	r := w.c.Do(t, http.MethodPost, "/mem0/v3/memories/add/", body)
	var added struct{ Results []struct{ Event string } }
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &added) != nil || len(added.Results) != 1 {
		t.Fatalf("mem0 add with inference: %d %s", r.Status, r.Body)
	}

	cs, err := sdk.NewClient(&sdk.Implementation{Name: "loom-workers-test"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: w.url + "/mcp", HTTPClient: &http.Client{Transport: bearer{w.token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "memory_from_messages", Arguments: map[string]any{
		"namespace": ns, "messages": []map[string]string{{"role": "user", "content": "I live in Lisbon."}}}})
	if err != nil || res.IsError {
		t.Fatalf("MCP memory_from_messages: %v %+v", err, res)
	}

	if got := tagsOf(); got != "array" {
		t.Fatalf("the amended untagged head stores tags as %s; want an array", got)
	}

	// A head an earlier build stored with "tags": null (and its text unsealed).
	if _, err := pool.Exec(ctx, `UPDATE loom.memory_current SET row = jsonb_set(`+heads.Row+`, '{tags}', 'null'), sealed = NULL
		WHERE org = $1 AND namespace = $2 AND memory_key = (SELECT loom.key_ref($1, 'untagged'))`, org, ns); err != nil {
		t.Fatal(err)
	}
	fromMessages("over a head stored with tags null")
	migration, err := pgmigrations.Files.ReadFile("058_heads_tags_never_null.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, string(migration)); err != nil {
		t.Fatalf("migration 058: %v", err)
	}
	if got := tagsOf(); got != "array" {
		t.Fatalf("after migration 058 the head stores tags as %s; want an array", got)
	}
	// The rows written here are extracted before the next test's workers start: they
	// share the extractor's group and queue, and would call that test's model.
	drained(t, pool, entitiesWorker, org)
}

// The entity extractor's revision amends the version a writer was answered: the head
// keeps that version (and gains the entities), so the writer's next read, its
// memory.delete_version of that version and the key's history all name it, and a write
// under if_match_sha256 of the acknowledged value lands; the journal holds both
// revisions of the version, and ClickHouse's row and the graph hold the entities.
func TestEntityExtractionKeepsTheAnsweredVersion(t *testing.T) {
	const org = "amended-version"
	w := startWorkers(t, org, []string{entitiesWorker}, noExtractionQueue)
	scriptExtraction(w.srv)
	ctx := context.Background()
	pool := env.PG(t)
	ns := testenv.Unique(t, "version")
	anon := client.Identity{}
	ack := set(t, w.tc, ns, "home", "Alice moved to Lisbon", anon)
	work := set(t, w.tc, ns, "work", "Alice works at Acme", anon)
	drained(t, pool, entitiesWorker, org)

	m := get(t, w.tc, ns, "home", anon)
	if m.Version != ack.Version || !slices.Contains(m.Entities, "Alice") {
		t.Fatalf("the head after extraction: version %d entities %v; want the answered version %d with the entities", m.Version, m.Entities, ack.Version)
	}
	if ops := journalOps(t, org, ns, m.MemoryID); len(ops) != 2 || ops[1] != "memory.extract_entities" {
		t.Fatalf("the journal %v; want the write and the extraction's amendment", ops)
	}
	if n := testenv.Int(t, pool, `SELECT count(DISTINCT version) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND memory_id = $3::uuid`,
		org, ns, m.MemoryID); n != 1 {
		t.Fatalf("the journal holds %d versions of the memory; want the one answered", n)
	}
	h, err := w.tc.History(ctx, ns, "home", anon)
	if err != nil || len(h.Versions) != 1 || h.Versions[0].Version != ack.Version || h.Versions[0].Event != "memory.written" {
		t.Fatalf("history: %+v, %v; want the answered version, written", h, err)
	}
	// ClickHouse's current row is the amendment (the later seq of the version), and the
	// graph folded its facts.
	testenv.Eventually(t, 30*time.Second, "ClickHouse's row to hold the entities", func() bool {
		got := testenv.CHStrings(t, env.CH(t), `SELECT arrayStringConcat(entities, ',') FROM loom.memory FINAL
			WHERE org = ? AND namespace = ? AND memory_key = 'home'`, org, ns)
		return strings.Join(got, "|") == "Alice,Lisbon"
	})
	testenv.Eventually(t, 30*time.Second, "the graph to hold Alice's fact", func() bool {
		e, err := w.tc.Entity(ctx, ns, "Alice", client.EntityOptions{})
		return err == nil && len(e.Facts) == 1
	})
	// A conditional write from the acknowledgement lands over the amended head.
	if a, err := w.tc.Set(ctx, ns, "work", client.SetRequest{Value: "Alice works at Initech", IfMatchSHA256: work.ContentSHA256}); err != nil || a.Version <= work.Version {
		t.Fatalf("a write under if_match_sha256 of the acknowledged value: %+v, %v", a, err)
	}
	d, err := w.tc.Delete(ctx, ns, "home", anon, strconv.FormatInt(ack.Version, 10))
	if err != nil || !d.Deleted || d.VersionChanged {
		t.Fatalf("memory.delete_version of the answered version: %+v, %v", d, err)
	}
	drained(t, env.PG(t), entitiesWorker, org)
}

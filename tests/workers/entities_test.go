package workers

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

type scriptedEntity struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	Aliases []string `json:"aliases"`
}

type scriptedRelation struct {
	Subject   string `json:"subject"`
	Predicate string `json:"predicate"`
	Object    string `json:"object"`
}

// Rows written without entities get the model's entities and relations as an amendment
// of the version written; "NYC" and "New York City" resolve to one entity of the namespace, named by
// the row that stated it first; a row that declares its entities is never sent. The
// graph folds the extracted facts like declared ones, and a second projection folding
// the topic from earliest leaves the graph's tables identical; a replay of the
// extractor's group extracts nothing again. A redaction forgets the spellings its row
// introduced.
func TestEntitiesExtractedResolvedAcrossAliasesAndIdenticalAfterAReplay(t *testing.T) {
	const org = "entities"
	start := time.Now().UTC()
	w := startWorkers(t, org, []string{entitiesWorker}, nil)
	answers := map[string]map[string]any{
		"moved to NYC": {"entities": []scriptedEntity{{"NYC", "place", []string{"New York City"}}, {"Alice", "person", []string{}}},
			"relations": []scriptedRelation{{"Alice", "lives_in", "NYC"}}},
		"works in New York City": {"entities": []scriptedEntity{{"New York City", "place", []string{"NYC", "the Big Apple"}}, {"Bob", "person", []string{}}},
			"relations": []scriptedRelation{{"Bob", "works_in", "New York City"}}},
		"drinks green tea": {"entities": []scriptedEntity{}, "relations": []scriptedRelation{}},
	}
	w.srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		if r.SchemaName != "entity_extraction" {
			return llmtest.Status(500, "unscripted")
		}
		for text, a := range answers {
			if r.Contains(text) {
				return llmtest.JSON(a)
			}
		}
		return llmtest.Status(500, "unscripted")
	})
	ctx := context.Background()
	pool := env.PG(t)
	ns := testenv.Unique(t, "graph")
	anon := client.Identity{}
	set(t, w.tc, ns, "alice-home", "Alice moved to NYC last spring", anon)
	drained(t, pool, entitiesWorker, org)
	set(t, w.tc, ns, "bob-job", "Bob works in New York City", anon)
	set(t, w.tc, ns, "tea", "Alice drinks green tea", anon)
	declared, err := w.tc.Set(ctx, ns, "carol", client.SetRequest{Value: "Carol lives in Boston", Entities: []client.Entity{{Name: "Carol"}, {Name: "Boston"}}})
	if err != nil {
		t.Fatal(err)
	}
	drained(t, pool, entitiesWorker, org)

	alice, bob := get(t, w.tc, ns, "alice-home", anon), get(t, w.tc, ns, "bob-job", anon)
	if !slices.Contains(alice.Entities, "NYC") || !slices.Contains(bob.Entities, "NYC") || slices.Contains(bob.Entities, "New York City") {
		t.Fatalf("entities: alice's row %v, bob's %v; want NYC in both (the alias resolved to the first row's name)", alice.Entities, bob.Entities)
	}
	if len(bob.Relations) != 1 || bob.Relations[0].Object != "NYC" {
		t.Fatalf("bob's relations %+v; want works_in NYC", bob.Relations)
	}
	if ops := journalOps(t, org, ns, bob.MemoryID); ops[len(ops)-1] != "memory.extract_entities" {
		t.Fatalf("bob's journal %v; want the extraction's revision last", ops)
	}
	if tea := get(t, w.tc, ns, "tea", anon); len(tea.Entities) != 0 {
		t.Fatalf("a row the model found nothing in: %v", tea.Entities)
	}
	// The extractor is the deployment's: it may also ask about another test's rows left
	// owed, so only the calls about this test's rows are counted.
	ownCalls := func() int {
		n := 0
		for _, c := range w.srv.Chats() {
			if c.Contains("Carol") {
				t.Fatalf("a row that declared its entities was sent to the model")
			}
			if c.Contains("Alice moved to NYC") || c.Contains("Bob works in New York City") || c.Contains("Alice drinks green tea") {
				n++
			}
		}
		return n
	}
	calls := ownCalls()
	if calls != 3 {
		t.Fatalf("%d calls; want one per row written without entities, 3", calls)
	}
	if c := get(t, w.tc, ns, "carol", anon); c.Version != declared.Version {
		t.Fatalf("the declared row was revised: version %d, written at %d", c.Version, declared.Version)
	}

	graph := func() *client.EntityAnswer {
		t.Helper()
		var e *client.EntityAnswer
		testenv.Eventually(t, 30*time.Second, "the graph to hold NYC's facts", func() bool {
			var err error
			e, err = w.tc.Entity(ctx, ns, "NYC", client.EntityOptions{})
			return err == nil && len(e.Facts) == 2
		})
		return e
	}
	nyc := graph()
	var subjects []string
	for _, f := range nyc.Facts {
		subjects = append(subjects, f.Subject+" "+f.Predicate)
	}
	slices.Sort(subjects)
	if strings.Join(subjects, ", ") != "alice lives_in, bob works_in" {
		t.Fatalf("NYC's facts: %v", subjects)
	}

	// A second projection folds the whole topic from earliest over the same tables:
	// they stay identical, extracted facts and all.
	conn := env.CH(t)
	before := testenv.TableSums(t, conn, org, []string{ns})
	p2 := strings.ReplaceAll(testenv.Unique(t, "p"), "-", "_")
	stop := env.Projector(t, p2)
	testenv.Eventually(t, time.Minute, "the second projection to reach the generation", func() bool {
		return testenv.Watermark(t, pool, p2, org, ns) == testenv.Generation(t, pool, org, ns)
	})
	stop()
	if after := testenv.TableSums(t, conn, org, []string{ns}); !maps.Equal(before, after) {
		t.Fatalf("the graph's tables changed under a fold from earliest:\n before %v\n after  %v", before, after)
	}

	// A replay of the extractor's group queues every row again: nothing is extracted twice.
	w.replay(start.Format(time.RFC3339Nano))
	drained(t, pool, entitiesWorker, org)
	if n := ownCalls(); n != calls {
		t.Fatalf("the replay made %d calls; want none", n-calls)
	}

	// The spellings bob's row introduced ("bob", "the big apple") go with its redaction.
	aliases := func() []string {
		return testenv.PGStrings(t, pool, `SELECT alias FROM loom.entity_aliases WHERE org = $1 AND namespace = $2 ORDER BY alias`, org, ns)
	}
	if got := strings.Join(aliases(), ","); got != "alice,bob,new york city,nyc,the big apple" {
		t.Fatalf("the namespace's aliases: %s", got)
	}
	if _, err := w.tc.Delete(ctx, ns, "bob-job", anon, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := w.tc.Redact(ctx, ns, "bob-job", client.RedactRequest{Version: bob.VersionText}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(aliases(), ","); got != "alice,new york city,nyc" {
		t.Fatalf("after bob's redaction, the aliases: %s", got)
	}
}

package workers

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

const consolidationWorker = "profile_consolidation"

// scriptedSections answers the profile_consolidation pass: its first answer is outside
// the section's schema (preferences a string), every later one a section read off the
// prompt's memories. It notes whether a prompt ever carried a memory of another type.
type scriptedSections struct {
	mu      sync.Mutex
	calls   int
	leaked  bool
	ofUsers map[string]int
}

func (p *scriptedSections) answer(r llmtest.ChatRequest) llmtest.Reply {
	if r.SchemaName != "profile_section" {
		return llmtest.Status(500, "unscripted")
	}
	p.mu.Lock()
	p.calls++
	first := p.calls == 1
	p.leaked = p.leaked || r.Contains("Lisbon")
	p.mu.Unlock()
	if first {
		return llmtest.Raw(`{"preferences": "window seats", "decisions": []}`)
	}
	prefs, decisions := []string{}, []string{}
	for _, seat := range []string{"window seats", "aisle seats"} {
		if r.Contains("prefers " + seat) {
			prefs = append(prefs, "Prefers "+seat)
		}
	}
	if r.Contains("fly with TAP") {
		decisions = append(decisions, "Flies with TAP for the lounge")
	}
	return llmtest.JSON(map[string]any{"preferences": prefs, "decisions": decisions})
}

func (p *scriptedSections) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// A user's profile section of preferences and decisions (profile_consolidation, opt-in
// per namespace): opting in builds the section of a user whose preferences and
// decisions were written before, from those memories alone, with the model's first
// answer (outside the section's schema) refused, asked again and never stored;
// profile.render renders it and context.pack packs its statements, each cited, and no
// search serves it; it is rebuilt when a source changes and not otherwise (a write of
// another type, a replay of the group, a new process's scan); opting out stops serving
// it; and it vanishes with the user's erasure. /v1/health shows the pass.
func TestProfileConsolidationWritesASectionOfPreferencesAndDecisions(t *testing.T) {
	const org = "sections"
	w := startWorkers(t, org, []string{consolidationWorker}, func(c *config.Config) {
		c.Workers.ProfileConsolidation.Enabled, c.Workers.ProfileConsolidation.Interval = true, 100*time.Millisecond
	})
	sections := &scriptedSections{}
	w.srv.Script(sections.answer)
	pool := env.PG(t)
	ns := testenv.Unique(t, "sect")

	put := func(key, typ, value string) {
		t.Helper()
		if r := w.c.Put(t, ns, key, map[string]any{"value": value, "user_id": "ana", "memory_type": typ}); r.Status != http.StatusOK {
			t.Fatalf("set %s: %d %s", key, r.Status, r.Body)
		}
	}
	render := func() (map[string]any, int) {
		t.Helper()
		r := w.c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/profiles/ana/render?format=markdown", nil)
		if r.Status != http.StatusOK {
			return nil, r.Status
		}
		return r.JSON(t), r.Status
	}
	optIn := func(on bool) {
		t.Helper()
		w.c.Configure(t, ns, map[string]any{"conflict_policy": "append_only", "profile_consolidation": on})
	}
	sectionRevisions := func() int64 {
		t.Helper()
		return testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND memory_key = (SELECT loom.key_ref($1, 'profile_section:ana'))`, org, ns)
	}

	// Written before the namespace opts in: nothing is built for them yet.
	optIn(false)
	put("seat", "preference", "Ana prefers window seats")
	put("airline", "decision", "Ana decided to fly with TAP because of the lounge")
	put("home", "fact", "Ana lives in Lisbon")
	drained(t, pool, consolidationWorker, org)
	if _, status := render(); status != http.StatusNotFound || sections.count() != 0 {
		t.Fatalf("profile.render before the opt-in: %d after %d model calls; want 404 and none", status, sections.count())
	}

	optIn(true)
	testenv.Eventually(t, 60*time.Second, "ana's profile section to be built", func() bool {
		_, status := render()
		return status == http.StatusOK
	})
	drained(t, pool, consolidationWorker, org)
	first, _ := render()
	text, cites := first["text"].(string), first["citations"].([]any)
	if !strings.Contains(text, "## Preferences and decisions of ana") || !strings.Contains(text, "- Prefers window seats") ||
		!strings.Contains(text, "- Flies with TAP for the lounge") || strings.Contains(text, "Lisbon") {
		t.Fatalf("profile.render:\n%s", text)
	}
	if len(cites) != 1 || !strings.HasPrefix(cites[0].(string), ns+"/profile_section:ana@") || first["citation"] != cites[0] {
		t.Fatalf("profile.render's citations %v (citation %v); want the section's row alone", cites, first["citation"])
	}
	calls := sections.count()
	if n := sectionRevisions(); n != 1 || calls != 2 || sections.leaked {
		t.Fatalf("section revisions %d after %d model calls (a fact in a prompt: %v); want the out-of-schema answer refused, asked again, "+
			"one revision stored, built from the preference and the decision alone", n, calls, sections.leaked)
	}
	section := get(t, w.tc, ns, "profile_section:ana", client.Identity{UserID: "ana"})
	if section.MemoryType != "profile" {
		t.Fatalf("the section's row is of type %q; want profile (not searchable)", section.MemoryType)
	}

	// context.pack packs its statements in the profile layer, each citing the section's
	// version; a search does not serve it.
	r := w.c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/context:pack", []byte(`{"user_id": "ana", "sections": ["profile"]}`))
	if r.Status != http.StatusOK {
		t.Fatalf("context.pack: %d %s", r.Status, r.Body)
	}
	pack := r.JSON(t)
	lines := pack["sections"].([]any)[0].(map[string]any)["lines"].([]any)
	want := "m:" + section.MemoryID + "@" + section.VersionText
	if len(lines) != 2 || lines[0].(map[string]any)["text"] != "preference: Prefers window seats" ||
		lines[1].(map[string]any)["text"] != "decision: Flies with TAP for the lounge" || lines[0].(map[string]any)["cite"] != want {
		t.Fatalf("context.pack's profile layer %v; want the section's two statements citing %s", lines, want)
	}
	if s := w.c.Search(t, ns, "which seats does ana prefer", 10); strings.Contains(string(s.Body), "profile_section:") {
		t.Fatalf("a search served the profile section: %s", s.Body)
	}

	// Nothing its sources hold changed: a fact of another type, a replay of the group
	// from the topic's start and a new process's scan of the opt-ins build nothing.
	put("work", "fact", "Ana works as a nurse")
	w.replay("earliest")
	drained(t, pool, consolidationWorker, org)
	if again, _ := render(); sections.count() != calls || again["citation"] != first["citation"] {
		t.Fatalf("model calls %d → %d, citation %v → %v; want no rebuild while the sources are unchanged",
			calls, sections.count(), first["citation"], again["citation"])
	}

	// A source changes: the section is rebuilt from it.
	put("seat", "preference", "Ana prefers aisle seats now")
	drained(t, pool, consolidationWorker, org)
	moved, _ := render()
	if text := moved["text"].(string); !strings.Contains(text, "Prefers aisle seats") || strings.Contains(text, "window") ||
		moved["citation"] == first["citation"] || sectionRevisions() != 2 {
		t.Fatalf("profile.render after the change (%d revisions):\n%v", sectionRevisions(), moved)
	}

	// One view of the pass in /v1/health, its queue with include=workers; /metrics
	// counts its builds.
	op := env.Operator(t, w.url)
	testenv.Eventually(t, 30*time.Second, "health's profile_consolidation pass run, its queue drained", func() bool {
		health := op.Do(t, http.MethodGet, "/v1/health?include=workers", nil).JSON(t)
		pass, _ := health["passes"].(map[string]any)[consolidationWorker].(map[string]any)
		queue, _ := pass["queue"].(map[string]any)
		return pass != nil && pass["enabled"] == true && pass["rows_done"].(float64) >= 1 && pass["last_run"] != nil &&
			queue != nil && queue["done"].(float64) >= 1
	})
	if m := op.Do(t, http.MethodGet, "/metrics", nil); !strings.Contains(string(m.Body), `loom_profile_consolidation_builds_total{outcome="built"}`) {
		t.Fatal("/metrics does not count the pass's builds")
	}

	// Opting out stops serving the section; opting in again serves it as it was, with
	// no model call.
	optIn(false)
	if _, status := render(); status != http.StatusNotFound {
		t.Fatalf("profile.render after the opt-out: %d; want 404", status)
	}
	calls = sections.count()
	optIn(true)
	drained(t, pool, consolidationWorker, org)
	if back, status := render(); status != http.StatusOK || back["citation"] != moved["citation"] || sections.count() != calls {
		t.Fatalf("profile.render after opting in again: %d %v after %d more model calls; want the same section, none",
			status, back, sections.count()-calls)
	}

	// The section is the user's row: their erasure takes it, history and all.
	w.c.Erase(t, map[string]any{"user_id": "ana", "namespace": ns})
	drained(t, pool, consolidationWorker, org)
	if _, status := render(); status != http.StatusNotFound {
		t.Fatalf("profile.render after the user's erasure: %d; want 404", status)
	}
	if n := sectionRevisions(); n != 0 {
		t.Fatalf("%d section revisions left after the erasure", n)
	}
}

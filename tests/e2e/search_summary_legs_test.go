package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/tests/testenv"
)

// A question only a session's digest answers (its words are in no turn and no memory)
// is found through the digest leg, citing the session; with that leg off, by the
// request's evidence_legs or the namespace's retrieval_defaults, or with the evidence
// legs off, nothing answers it. An unknown leg is refused naming the field.
func TestSearchFindsWhatOnlyADigestSays(t *testing.T) {
	workersFromNow(t)
	e := newConversationEnv(t)
	ctx := context.Background()
	trip := client.Identity{UserID: "alice", SessionID: "trip"}
	if _, err := e.tc.Observe(ctx, e.ns, client.ObserveRequest{Identity: trip, Turns: []client.ObservedTurn{
		{Role: "user", Content: "We booked the flights and the ryokan for after the wedding."},
		{Role: "assistant", Content: "Lovely, the cherry blossoms should be out by then."},
	}}); err != nil {
		t.Fatal(err)
	}
	e.srv.Script(func(r llmtest.ChatRequest) llmtest.Reply {
		if r.SchemaName == "session_digest" && r.Contains("ryokan") {
			return llmtest.JSON(map[string]any{"digest": "Alice is planning her honeymoon in Kyoto"})
		}
		return llmtest.Status(500, "unscripted")
	})
	_, _, stop := env.Serve(t, []string{"workers"}, func(c *config.Config) {
		withProvider(e.srv)(c)
		c.Workers.Resolver.Enabled, c.Workers.Entities.Enabled, c.Workers.Profiles.Enabled = false, false, false
		c.Workers.SessionDigest.Enabled, c.Workers.SessionDigest.MinTurns = true, 2
		c.Workers.SessionDigest.Idle, c.Workers.SessionDigest.Interval = time.Hour, 100*time.Millisecond
	})
	testenv.Eventually(t, 30*time.Second, "the trip session's digest", func() bool {
		r := e.c.Do(t, http.MethodGet, "/v1/namespaces/"+e.ns+"/sessions/trip/digest", nil)
		return r.Status == http.StatusOK && strings.Contains(string(r.Body), "Kyoto")
	})
	stop()

	const question = "where is the honeymoon, Kyoto?"
	a, err := e.alice.Search(ctx, e.ns, client.SearchRequest{Query: question, Evidence: &evidenceOn})
	if err != nil {
		t.Fatal(err)
	}
	if a.Evidence == nil || len(a.Evidence.Hits) != 1 {
		t.Fatalf("the evidence: %+v", a.Evidence)
	}
	h := a.Evidence.Hits[0]
	if h.Kind != "digest" || h.Cite != "s:trip" || h.SessionID != "trip" || h.UserID != "alice" ||
		h.Text != "Alice is planning her honeymoon in Kyoto" || h.Scores["digests"] <= 0 {
		t.Fatalf("the digest hit: %+v", h)
	}
	if len(a.Hits) != 0 {
		t.Errorf("memory hits for what only the digest says: %+v", a.Hits)
	}
	if l := evidenceLeg(t, a, "turns"); !l.Ran || l.Scanned == 0 || l.Matched != 0 {
		t.Errorf("the turns leg found the digest's words in a turn: %+v", l)
	}
	if l := evidenceLeg(t, a, "digests"); !l.Ran || l.Scanned != 1 || l.Matched != 1 || l.Served != 1 {
		t.Errorf("the digest leg's account: %+v", l)
	}

	noDigests := func(what string, a *client.SearchAnswer, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if a.Evidence == nil || len(a.Evidence.Hits) != 0 || len(a.Hits) != 0 {
			t.Errorf("%s answered: evidence %+v, hits %+v", what, a.Evidence, a.Hits)
		}
		if l := evidenceLeg(t, a, "digests"); l.Ran || l.Note != "not asked (evidence_legs)" {
			t.Errorf("%s: the digest leg's account %+v", what, l)
		}
	}
	off, err := e.alice.Search(ctx, e.ns, client.SearchRequest{Query: question, Evidence: &evidenceOn, EvidenceLegs: []string{"turns", "entities"}})
	noDigests("evidence_legs without digests", off, err)
	e.c.Configure(t, e.ns, map[string]any{"retrieval_defaults": map[string]any{"evidence": true, "evidence_legs": []string{"turns"}}})
	byDefault, err := e.alice.Search(ctx, e.ns, client.SearchRequest{Query: question})
	noDigests("the namespace's evidence_legs without digests", byDefault, err)
	again, err := e.alice.Search(ctx, e.ns, client.SearchRequest{Query: question, EvidenceLegs: []string{"digests"}})
	if err != nil || len(again.Evidence.Hits) != 1 || again.Evidence.Hits[0].Cite != "s:trip" {
		t.Errorf("the request's evidence_legs over the namespace's: %+v, %v", again.Evidence, err)
	}
	legsOff := false
	none, err := e.alice.Search(ctx, e.ns, client.SearchRequest{Query: question, Evidence: &legsOff})
	if err != nil || none.Evidence != nil || len(none.Hits) != 0 {
		t.Errorf("evidence: false answered: %+v, %+v, %v", none.Evidence, none.Hits, err)
	}

	r := e.c.Do(t, http.MethodPost, "/v1/namespaces/"+e.ns+"/memories:search", []byte(`{"query": "kyoto", "evidence_legs": ["memories"]}`))
	var body map[string]any
	_ = json.Unmarshal(r.Body, &body)
	if r.Status != http.StatusUnprocessableEntity || errorField(body) != "evidence_legs" {
		t.Errorf("an unknown evidence leg: %d %s", r.Status, r.Body)
	}
}

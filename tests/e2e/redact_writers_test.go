package e2e

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/loomplane/loom/tests/testenv"
)

// A redaction drops a row's sealed text, which holds its agent and session (migration
// 173: the columns hold their references); its scrub seals them again under the
// redaction's own key (migration 175), not in the row's JSON: the redacted version is
// still read by its identity, and opens to it.
func TestARedactedRowAnswersItsAgentAndSession(t *testing.T) {
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "redact-writers")
	const agent, session, user = "planner-bot", "sess-redact", "alice"
	v1 := c.Put(t, ns, "plan", map[string]any{"value": "the plan", "user_id": user, "agent": agent, "session_id": session}).JSON(t)
	c.Put(t, ns, "plan", map[string]any{"value": "the new plan", "user_id": user, "agent": agent, "session_id": session})
	path := "/v1/namespaces/" + ns + "/memories/plan"
	if r := c.Do(t, http.MethodPost, path+":redact", mustJSON(t, map[string]any{"version": v1["version_text"], "user_id": user,
		"agent": agent, "session_id": session})); r.Status != http.StatusOK {
		t.Fatalf("redact: %d %s", r.Status, r.Body)
	}
	query := "?user_id=" + user + "&agent=" + agent + "&session_id=" + session
	h := c.Do(t, http.MethodGet, path+"/history"+query, nil)
	if h.Status != http.StatusOK {
		t.Fatalf("history: %d %s", h.Status, h.Body)
	}
	var history struct {
		Versions []struct {
			Redacted bool `json:"redacted"`
		} `json:"versions"`
	}
	if err := json.Unmarshal(h.Body, &history); err != nil {
		t.Fatal(err)
	}
	redacted := 0
	for _, v := range history.Versions {
		if v.Redacted {
			redacted++
		}
	}
	if len(history.Versions) != 2 || redacted != 1 {
		t.Fatalf("history answers %d versions, %d redacted; want 2, 1: %s", len(history.Versions), redacted, h.Body)
	}
	where := ` FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND agent = loom.agent_ref($1, $3)
		AND session_id = loom.session_ref($1, $4) AND redacted_at IS NOT NULL`
	stored := testenv.PGStrings(t, env.PG(t), `SELECT coalesce(row->>'agent', '') || '/' || coalesce(row->>'session_id', '')`+where, org, ns, agent, session)
	if len(stored) != 1 || stored[0] != "/" {
		t.Fatalf("the scrubbed revision's JSON names %q, want neither agent nor session", stored)
	}
	opened := testenv.PGStrings(t, env.PG(t), `SELECT o->>'agent' || '/' || (o->>'session_id')
		FROM (SELECT loom.opened_row(row, sealed, org, namespace, seq) AS o`+where+`) x`, org, ns, agent, session)
	if len(opened) != 1 || opened[0] != agent+"/"+session {
		t.Fatalf("the scrubbed revision opens to %v, want %s/%s", opened, agent, session)
	}
}

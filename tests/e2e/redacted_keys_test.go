package e2e

import (
	"context"
	"net/http"
	"testing"

	"github.com/loomplane/loom/tests/testenv"
)

// A redaction destroys a row's sealed text with its revision's key; what the row
// keeps of it, its key and user, is sealed under a key of the redaction's own, kept on
// the scrubbed revision (migration 175): no scrubbed row's JSON holds them, and the
// reads of a redacted version and of a redacted head answer them still.
func TestARedactedRowHoldsItsKeyOnlySealed(t *testing.T) {
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "redkey")
	key, user := "redacted-"+marker(t), marker(t)
	v1 := c.Put(t, ns, key, map[string]any{"value": "the first locker code", "user_id": user}).JSON(t)
	c.Put(t, ns, key, map[string]any{"value": "the second locker code", "user_id": user})
	path := "/v1/namespaces/" + ns + "/memories/" + key
	redact := func(version any) {
		t.Helper()
		if r := c.Do(t, http.MethodPost, path+":redact", mustJSON(t, map[string]any{"version": version, "user_id": user})); r.Status != http.StatusOK {
			t.Fatalf("redact %v: %d %s", version, r.Status, r.Body)
		}
	}
	redact(v1["version_text"])
	// The live head's text is a later version's; delete it, then redact that version,
	// which scrubs the head (the tombstone copies its text) too.
	head := c.Do(t, http.MethodGet, path+"?user_id="+user, nil).JSON(t)
	if r := c.Do(t, http.MethodDelete, path+"?user_id="+user, nil); r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	redact(head["version_text"])

	pool := env.PG(t)
	var scrubbed, sealed, heads int
	if err := pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE sealed IS NOT NULL AND redaction_key IS NOT NULL),
			(SELECT count(*) FROM loom.memory_current WHERE org = $1 AND namespace = $2 AND (row->>'redacted')::boolean)
		FROM loom.memory_revisions WHERE org = $1 AND namespace = $2 AND redacted_at IS NOT NULL`, org, ns).Scan(&scrubbed, &sealed, &heads); err != nil {
		t.Fatal(err)
	}
	if scrubbed < 3 || sealed != scrubbed || heads != 1 {
		t.Errorf("%d revisions scrubbed, %d of them sealed under a redaction key; %d heads scrubbed", scrubbed, sealed, heads)
	}
	if found := tablesHolding(t, pool, org, key, "loom.memory_current", "loom.memory_revisions"); len(found) > 0 {
		t.Errorf("after the redactions, these tables hold the redacted memory's key in the clear: %v", found)
	}
	if found := tablesHolding(t, pool, org, user, "loom.memory_current", "loom.memory_revisions"); len(found) > 0 {
		t.Errorf("after the redactions, these tables hold the redacted memory's user in the clear: %v", found)
	}

	// The reads answer the key and the user of every redacted row: the journal's
	// opened (as history, the export and the relay's reads open it), and the head's
	// through the API.
	opened := testenv.PGStrings(t, pool, `SELECT DISTINCT coalesce(o->>'memory_key', '') || ' ' || coalesce(o->>'user_id', '') || ' ' || coalesce(o->>'redacted', '')
		FROM (SELECT `+"loom.opened_row(row, sealed, org, namespace, seq, user_id)"+` AS o FROM loom.memory_revisions
			WHERE org = $1 AND namespace = $2 AND redacted_at IS NOT NULL) x`, org, ns)
	if want := key + " " + user + " true"; len(opened) != 1 || opened[0] != want {
		t.Errorf("the redacted revisions open as %q, want %q", opened, want)
	}
	h := c.Do(t, http.MethodGet, path+"/history?user_id="+user, nil)
	if h.Status != http.StatusOK {
		t.Fatalf("history: %d %s", h.Status, h.Body)
	}
	redacted := 0
	for _, v := range h.JSON(t)["versions"].([]any) {
		if v.(map[string]any)["redacted"] == true {
			redacted++
		}
	}
	if redacted != 3 {
		t.Fatalf("history answers %d redacted versions, want 3: %s", redacted, h.Body)
	}
	in := c.Do(t, http.MethodGet, path+"/inspect?user_id="+user, nil)
	if in.Status != http.StatusOK {
		t.Fatalf("inspect: %d %s", in.Status, in.Body)
	}
	if hv, _ := in.JSON(t)["head"].(map[string]any); hv == nil || hv["memory_key"] != key || hv["user_id"] != user || hv["redacted"] != true {
		t.Fatalf("inspect's redacted head: %s", in.Body)
	}
}

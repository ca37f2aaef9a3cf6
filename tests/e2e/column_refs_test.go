package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/loomplane/loom/client"
)

// A write's heads and revisions name its user, agent, session and key by the values
// Postgres's loom.user_ref, agent_ref, session_ref and key_ref compute, which every
// read by identity derives in SQL (the commit computes them in Go and binds them):
// rows of a single write, of a conflict's copy of its peer and of a bulk write, with
// and without a user, an agent and a session. Each row's content hash is keyed (its
// scope's key found under the user's reference) and its user's name is kept.
func TestWrittenRowsCarryTheReferencesPostgresComputes(t *testing.T) {
	e := newPhaseEnv(t, nil)
	ctx := context.Background()
	user, agent, session := "zoë-"+marker(t), "planner-α", "sess ☂ "+marker(t)
	who := client.Identity{UserID: user, Agent: agent, SessionID: session}
	put := func(key, value string, id client.Identity) map[string]any {
		t.Helper()
		body := map[string]any{"value": value}
		for field, v := range map[string]string{"user_id": id.UserID, "agent": id.Agent, "session_id": id.SessionID} {
			if v != "" {
				body[field] = v
			}
		}
		b, _ := json.Marshal(body)
		r := e.c.Do(t, http.MethodPut, "/v1/namespaces/"+e.ns+"/memories/"+url.PathEscape(key), b)
		if r.Status != http.StatusOK {
			t.Fatalf("PUT %s: %d %s", key, r.Status, r.Body)
		}
		return r.JSON(t)
	}
	put("clé-1", "the user lives in Lisbon", who)
	if a := put("clé-2", "the user lives in Berlin", who); a["verdict"] != "conflict" {
		t.Fatalf("the second write's verdict is %v, want conflict (its peer's copy commits with it)", a["verdict"])
	}
	put("plain", "a memory of no user, agent or session", client.Identity{})
	if _, err := e.c.Typed(t).BulkSet(ctx, e.ns, client.BulkSetRequest{Entries: []client.BulkEntry{
		{Key: "bulk-ü", Value: "the first entry of a batch", Identity: who},
		{Key: "bulk-2", Value: "a second entry, of another user", Identity: client.Identity{UserID: "ålice", Agent: "-"}},
	}}); err != nil {
		t.Fatalf("bulk: %v", err)
	}
	ids := []client.Identity{who, who, {}, who, {UserID: "ålice", Agent: "-"}}
	keys := []string{"clé-1", "clé-2", "plain", "bulk-ü", "bulk-2"}
	var clear [4][]string // keys, agents, users, sessions as the API defaults them
	for i, id := range ids {
		clear[0] = append(clear[0], keys[i])
		clear[1] = append(clear[1], orDash(id.Agent))
		clear[2] = append(clear[2], orDash(id.UserID))
		clear[3] = append(clear[3], orDash(id.SessionID))
	}
	rows, err := e.pool.Query(ctx, `WITH w AS (
			SELECT u.k, loom.key_ref($1, u.k) AS key_ref, loom.agent_ref($1, u.a) AS agent_ref,
				loom.user_ref($1, u.u) AS user_ref, loom.session_ref($1, u.s) AS session_ref
			FROM unnest($3::text[], $4::text[], $5::text[], $6::text[]) AS u(k, a, u, s))
		SELECT x.tbl, coalesce(w.k, '?'), coalesce(x.content_sha256, '') FROM (
			SELECT 'head' AS tbl, agent, user_id, session_id, memory_key, content_sha256 FROM loom.memory_current WHERE org = $1 AND namespace = $2
			UNION ALL SELECT 'revision', agent, user_id, session_id, memory_key, content_sha256 FROM loom.memory_revisions WHERE org = $1 AND namespace = $2) x
		LEFT JOIN w ON w.key_ref = x.memory_key AND w.agent_ref = x.agent AND w.user_ref = x.user_id AND w.session_ref = x.session_id`,
		e.org, e.ns, clear[0], clear[1], clear[2], clear[3])
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]int{}
	for rows.Next() {
		var tbl, key, sha string
		if err := rows.Scan(&tbl, &key, &sha); err != nil {
			t.Fatal(err)
		}
		if key == "?" {
			t.Errorf("a %s whose columns are no reference loom.*_ref computes for the written identities", tbl)
		}
		if len(sha) != 64 {
			t.Errorf("the %s of %s holds content hash %q: its scope's key was not found under its user's reference", tbl, key, sha)
		}
		found[tbl+" "+key]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// At least: each key's head, its revision, and the conflict's copy of clé-1's (a
	// worker's amendment may add revisions).
	for _, key := range keys {
		least := 1
		if key == "clé-1" {
			least = 2
		}
		if found["head "+key] != 1 || found["revision "+key] < least {
			t.Errorf("%s: %d heads and %d revisions found by the references Postgres computes, want 1 and at least %d (found %v)",
				key, found["head "+key], found["revision "+key], least, found)
		}
	}
	for _, u := range []string{user, "ålice"} {
		var name string
		if err := e.pool.QueryRow(ctx, `SELECT coalesce(loom.user_name($1, loom.user_ref($1, $2)), '')`, e.org, u).Scan(&name); err != nil {
			t.Fatal(err)
		}
		if name != u {
			t.Errorf("the name kept for user %q is %q", u, name)
		}
	}
}

func orDash(v string) string {
	if v == "" {
		return "-"
	}
	return v
}

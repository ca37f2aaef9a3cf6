package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/loomplane/loom/tests/testenv"
)

// memory.history answers from the journal on the authority. Once the projection has
// caught up, it answers what ClickHouse's memory_versions holds, version for version:
// writes, a revision, a status change, a delete, an Undo, a redacted version scrubbed;
// an erased user's versions are gone from it, another user's stay.
func TestHistoryFromTheJournalIsClickHousesHistory(t *testing.T) {
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "history")
	c.AppendOnly(t, ns)
	word := fmt.Sprintf("quokka%06d", time.Now().UnixNano()%1_000_000)
	path := "/v1/namespaces/" + ns + "/memories/tea"
	alice := map[string]any{"user_id": "alice"}
	with := func(m map[string]any) map[string]any {
		m["user_id"] = "alice"
		return m
	}
	v1 := c.Put(t, ns, "tea", with(map[string]any{"value": "alice drinks " + word + " tea", "tags": []string{"drink", word}})).JSON(t)
	c.Put(t, ns, "tea", with(map[string]any{"value": map[string]any{"drink": "green tea", "cups": 2}, "tags": []string{"drink"}}))
	asAlice := mustJSON(t, alice)
	for _, step := range []struct {
		method, path string
		body         []byte
	}{
		{http.MethodPost, path + ":pin", asAlice},
		{http.MethodPost, path + ":unpin", asAlice},
		{http.MethodDelete, path + "?user_id=alice", nil},
		{http.MethodPost, path + ":restore", asAlice},
	} {
		if r := c.Do(t, step.method, step.path, step.body); r.Status != http.StatusOK {
			t.Fatalf("%s %s: %d %s", step.method, step.path, r.Status, r.Body)
		}
	}
	c.Put(t, ns, "tea", map[string]any{"value": "bob drinks coffee", "user_id": "bob"})
	testenv.WaitProjected(t, env.PG(t), "main", org, ns)
	// Redacted after the projector wrote the version, so ClickHouse holds it scrubbed too.
	if r := c.Do(t, http.MethodPost, path+":redact", mustJSON(t, map[string]any{"version": v1["version_text"], "user_id": alice["user_id"]})); r.Status != http.StatusOK {
		t.Fatalf("redact: %d %s", r.Status, r.Body)
	}
	testenv.WaitProjected(t, env.PG(t), "main", org, ns)

	h := c.Do(t, http.MethodGet, path+"/history?user_id=alice", nil)
	if h.Status != http.StatusOK {
		t.Fatalf("history: %d %s", h.Status, h.Body)
	}
	got := versionsOf(t, h.Body)
	want := clickHouseVersions(t, org, ns, "alice", "tea")
	if len(got) != 6 || !reflect.DeepEqual(got, want) {
		t.Fatalf("history from the journal:\n%v\nClickHouse's memory_versions:\n%v", got, want)
	}
	events := []string{}
	for _, v := range got {
		events = append(events, v.Event)
	}
	if !got[0].Redacted || got[0].Value != "null" || len(got[0].Tags) != 0 || got[1].Redacted || !got[4].Tombstone || got[5].Tombstone {
		t.Fatalf("history: the first version scrubbed, the fifth a tombstone, the Undo live: %+v (events %v)", got, events)
	}
	if s := string(h.Body); strings.Contains(s, word) {
		t.Fatalf("history serves the redacted text: %s", s)
	}

	// A namespace restored from a snapshot: its history is its own revisions, as
	// ClickHouse holds them.
	snap := c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+":snapshot", nil)
	if snap.Status != http.StatusOK {
		t.Fatalf("snapshot: %d %s", snap.Status, snap.Body)
	}
	restored := testenv.Unique(t, "history-restored")
	if r := c.DoHeaders(t, http.MethodPost, "/v1/namespaces/"+restored+":restore", snap.Body, map[string]string{"Content-Type": "application/x-ndjson"}); r.Status != http.StatusOK {
		t.Fatalf("restore: %d %s", r.Status, r.Body)
	}
	testenv.WaitProjected(t, env.PG(t), "main", org, restored)
	r := c.Do(t, http.MethodGet, "/v1/namespaces/"+restored+"/memories/tea/history?user_id=alice", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("history in the restored namespace: %d %s", r.Status, r.Body)
	}
	if got, want := versionsOf(t, r.Body), clickHouseVersions(t, org, restored, "alice", "tea"); len(got) != 1 || !reflect.DeepEqual(got, want) {
		t.Fatalf("history in the restored namespace:\n%v\nClickHouse's memory_versions:\n%v", got, want)
	}

	// Erasure: alice's versions are gone, bob's stay.
	c.Erase(t, map[string]any{"user_id": "alice", "namespace": ns})
	if r := c.Do(t, http.MethodGet, path+"/history?user_id=alice", nil); r.Status != http.StatusNotFound {
		t.Fatalf("history of an erased user's key: %d %s", r.Status, r.Body)
	}
	if r := c.Do(t, http.MethodGet, path+"/history?user_id=bob", nil); r.Status != http.StatusOK || len(versionsOf(t, r.Body)) != 1 {
		t.Fatalf("history of another user's key after the erasure: %d %s", r.Status, r.Body)
	}
}

// historyVersion is what both stores say of one version; updated_at to the second,
// as ClickHouse keeps it, and the value as compact JSON.
type historyVersion struct {
	Version            string
	Seq                uint64
	Event, MemoryID    string
	MemoryType, Status string
	Tombstone          bool
	Value              string
	ContentSHA256      string
	Tags               []string
	ReinforcementCount uint32
	Actor              string
	UpdatedAt          time.Time
	Redacted           bool
}

func versionsOf(t *testing.T, body []byte) []historyVersion {
	t.Helper()
	var ans struct {
		Versions []struct {
			VersionText        string          `json:"version_text"`
			Seq                uint64          `json:"seq"`
			Event              string          `json:"event"`
			MemoryID           string          `json:"memory_id"`
			MemoryType         string          `json:"memory_type"`
			Status             string          `json:"status"`
			Tombstone          bool            `json:"tombstone"`
			Value              json.RawMessage `json:"value"`
			ContentSHA256      string          `json:"content_sha256"`
			Tags               []string        `json:"tags"`
			ReinforcementCount uint32          `json:"reinforcement_count"`
			Actor              string          `json:"actor"`
			UpdatedAt          time.Time       `json:"updated_at"`
			Redacted           bool            `json:"redacted"`
		} `json:"versions"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		t.Fatalf("history answer %s: %v", body, err)
	}
	out := []historyVersion{}
	for _, v := range ans.Versions {
		out = append(out, historyVersion{Version: v.VersionText, Seq: v.Seq, Event: v.Event, MemoryID: v.MemoryID,
			MemoryType: v.MemoryType, Status: v.Status, Tombstone: v.Tombstone, Value: compactJSON(t, v.Value),
			ContentSHA256: v.ContentSHA256, Tags: v.Tags, ReinforcementCount: v.ReinforcementCount, Actor: v.Actor,
			UpdatedAt: v.UpdatedAt.UTC().Truncate(time.Second), Redacted: v.Redacted})
	}
	return out
}

// clickHouseVersions reads a key's versions from ClickHouse's memory_versions, as
// memory.history answered them before it read the journal.
func clickHouseVersions(t *testing.T, org, ns, user, key string) []historyVersion {
	t.Helper()
	rows, err := env.CH(t).Query(context.Background(), `SELECT version, seq, event_type, memory_id, memory_type, status, tombstone,
			value, content_sha256, tags, reinforcement_count, actor, updated_at, redacted
		FROM loom.memory_versions FINAL
		PREWHERE org = ? AND namespace = ? AND agent = '-' AND user_id = ? AND session_id = '-' AND memory_key = ?
		ORDER BY version`, org, ns, user, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := []historyVersion{}
	for rows.Next() {
		var v historyVersion
		var version uint64
		var tomb, redacted uint8
		var id uuid.UUID
		if err := rows.Scan(&version, &v.Seq, &v.Event, &id, &v.MemoryType, &v.Status, &tomb, &v.Value, &v.ContentSHA256,
			&v.Tags, &v.ReinforcementCount, &v.Actor, &v.UpdatedAt, &redacted); err != nil {
			t.Fatal(err)
		}
		v.Version, v.MemoryID, v.Tombstone, v.Redacted = fmt.Sprint(version), id.String(), tomb == 1, redacted == 1
		v.Value, v.UpdatedAt = compactJSON(t, json.RawMessage(v.Value)), v.UpdatedAt.UTC()
		if v.Tags == nil {
			v.Tags = []string{}
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// compactJSON re-encodes a JSON value with sorted keys and no spaces; empty is null.
func compactJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	if len(raw) == 0 {
		return "null"
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("value %s: %v", raw, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

package e2e

import (
	"net/http"
	"testing"

	"github.com/loomplane/loom/tests/testenv"
)

// knowledge.inspect counts what the namespace's heads hold: live and deleted documents
// by format, the live ones' bytes and chunks, and the work still owed to them.
func TestKnowledgeInspectCountsDocumentsByFormat(t *testing.T) {
	_, c, _ := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "kinsp")
	docs := []map[string]any{
		{"source_uri": "notes/a.txt", "content": "Quokkas are marsupials.\n\nThey live on Rottnest Island."},
		{"source_uri": "notes/b.txt", "content": "The printer on floor two jams on duplex jobs."},
		{"source_uri": "guides/c.md", "content": "# Setup\n\nInstall the agent.\n\n## Run\n\nStart it with the token."},
		{"source_uri": "tables/d.csv", "content": "id,city\n1,Oslo\n2,Bergen\n"},
	}
	chunks := map[string]float64{}
	var bytes float64
	for _, d := range docs {
		a := kadd(t, c, ns, d)
		chunks[d["source_uri"].(string)] = a["chunk_count"].(float64)
		bytes += float64(len(d["content"].(string)))
	}
	if r := c.Do(t, http.MethodDelete, kpath(ns, "/document?source_uri=notes/b.txt"), nil); r.Status != http.StatusOK {
		t.Fatalf("knowledge.delete: %d %s", r.Status, r.Body)
	}
	ksearch(t, c, ns, map[string]any{"query": "quokka"}) // the barrier: the index has applied every write

	r := c.Do(t, http.MethodGet, kpath(ns, "/inspect"), nil)
	if r.Status != http.StatusOK {
		t.Fatalf("knowledge.inspect: %d %s", r.Status, r.Body)
	}
	in := r.JSON(t)
	wantChunks := chunks["notes/a.txt"] + chunks["guides/c.md"] + chunks["tables/d.csv"]
	wantBytes := bytes - float64(len(docs[1]["content"].(string)))
	if in["documents"] != 3.0 || in["deleted"] != 1.0 || in["chunks"] != wantChunks || in["bytes"] != wantBytes {
		t.Fatalf("knowledge.inspect = %s, want 3 documents, 1 deleted, %v chunks, %v bytes", r.Body, wantChunks, wantBytes)
	}
	byFormat := map[string]map[string]any{}
	for _, f := range in["by_format"].([]any) {
		f := f.(map[string]any)
		byFormat[f["format"].(string)] = f
	}
	if len(byFormat) != 3 || byFormat["text"]["live"] != 1.0 || byFormat["text"]["deleted"] != 1.0 ||
		byFormat["markdown"]["live"] != 1.0 || byFormat["markdown"]["chunks"] != chunks["guides/c.md"] || byFormat["csv"]["live"] != 1.0 {
		t.Fatalf("knowledge.inspect's by_format = %v", in["by_format"])
	}
	jobs, index := in["ingestions"].(map[string]any), in["index"].(map[string]any)
	if jobs["pending"] != 0.0 || jobs["processing"] != 0.0 || jobs["files_pending"] != 0.0 {
		t.Errorf("knowledge.inspect counts ingestion work in a namespace that submitted none: %v", jobs)
	}
	if index["behind"] != 0.0 || index["generation"].(float64) < 5 {
		t.Errorf("knowledge.inspect's index after a search passed its barrier = %v, want it at the generation", index)
	}

	// Owed work: a submitted job is counted until a run ends it.
	r = c.Do(t, http.MethodPost, kpath(ns, "/ingestions"), kjson(t, map[string]any{"documents": []map[string]any{
		{"source_uri": "notes/e.txt", "content": "Ingested later."}}}))
	if r.Status != http.StatusAccepted && r.Status != http.StatusOK {
		t.Fatalf("knowledge.ingest: %d %s", r.Status, r.Body)
	}
	in = c.Do(t, http.MethodGet, kpath(ns, "/inspect"), nil).JSON(t)
	jobs = in["ingestions"].(map[string]any)
	open := jobs["pending"].(float64) + jobs["processing"].(float64)
	switch {
	case open == 1 && jobs["files_pending"].(float64) <= 1: // still owed
	case open == 0 && jobs["files_pending"] == 0.0 && in["documents"] == 4.0: // a run already wrote it
	default:
		t.Errorf("knowledge.inspect after one submitted job of one file = %v", in)
	}
}

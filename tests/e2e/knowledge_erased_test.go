package e2e

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/loomplane/loom/tests/testenv"
)

// An erasure keeps evidence of every document version it removed
// (loom.erased_documents): a write built from one of them answers 404, never lands
// and never reads as a mere race (409), and a retry of a keyed write whose answer
// names an erased document answers 404 rather than replaying it.
func TestKnowledgeWriteBuiltFromAnErasedDocumentIs404(t *testing.T) {
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "ke")
	doc := map[string]any{"source_uri": "plan.txt", "content": "The heron project ships in May."}
	keyed := func() *testenv.Response {
		return c.DoHeaders(t, http.MethodPost, kpath(ns, ""), kjson(t, doc), map[string]string{"Idempotency-Key": "erased-1"})
	}
	first := keyed()
	if first.Status != http.StatusOK {
		t.Fatalf("add: %d %s", first.Status, first.Body)
	}
	// A version (nanoseconds) is past 2^53: it travels exactly as text.
	erasedVersion := first.JSON(t)["version_text"].(string)
	c.Erase(t, map[string]any{"namespace": ns})
	pool := env.PG(t)
	if n := testenv.Int(t, pool, `SELECT count(*) FROM loom.erased_documents WHERE org = $1 AND namespace = $2 AND doc_id = $3::uuid`,
		org, ns, first.JSON(t)["doc_id"]); n != 1 {
		t.Fatalf("%d evidence rows of the erased document, want 1", n)
	}

	// The keyed add's answer names the erased document: its retry is refused whole.
	if r := keyed(); r.Status != http.StatusNotFound {
		t.Fatalf("a retry of the keyed add after the erasure: %d %s", r.Status, r.Body)
	}

	// The source is written again after the erasure; writes built from the erased
	// version (the version their writer read) are refused 404, not 409.
	kadd(t, c, ns, map[string]any{"source_uri": "plan.txt", "content": "The heron project ships in June."})
	built := map[string]any{"source_uri": "plan.txt", "content": "The heron project ships in July.", "expected_version": json.RawMessage(erasedVersion)}
	if r := c.Do(t, http.MethodPut, kpath(ns, ""), kjson(t, built)); r.Status != http.StatusNotFound || r.ErrorCode() != "RESOURCE_NOT_FOUND" {
		t.Fatalf("an upsert built from the erased version: %d %s", r.Status, r.Body)
	}
	if r := c.Do(t, http.MethodDelete, kpath(ns, "/document?source_uri=plan.txt&expected_version="+erasedVersion), nil); r.Status != http.StatusNotFound {
		t.Fatalf("a delete built from the erased version: %d %s", r.Status, r.Body)
	}
	if r := kget(t, c, ns, "plan.txt"); r.Status != http.StatusOK || r.JSON(t)["deleted"] == true {
		t.Fatalf("the live head after the refused writes: %d %s", r.Status, r.Body)
	}
	// A write that reads after the erasure is built from the live head and lands.
	if r := c.Do(t, http.MethodDelete, kpath(ns, "/document?source_uri=plan.txt"), nil); r.Status != http.StatusOK {
		t.Fatalf("a delete of the live head: %d %s", r.Status, r.Body)
	}
}

package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"testing"

	"github.com/loomplane/loom/tests/testenv"
)

// A table in a document is a dataset: dataset_get proposes its schema, a query waits
// for an approval at the head's version, an approval of a version the head moved past
// is refused, the query grammar reads cells and values literally, and a namespace's
// erasure takes the catalog with the documents.
func TestKnowledgeDatasetsApproveAndQuery(t *testing.T) {
	_, c, org := env.OrgAPI(t, nil)
	ns := testenv.Unique(t, "kds")
	const injection = `'; DROP TABLE loom.knowledge_datasets; --`
	csv := "id,city,qty,day,note\n" +
		"1,Oslo,3,2024-01-02,first\n" +
		"2,Bergen,1,2024-01-03,\n" +
		"3,Oslo,5,2024-02-01,\"" + injection + "\"\n"
	// Versions are nanoseconds, past a float64's exact integers: read them as numbers.
	version := func(r *testenv.Response) json.Number {
		t.Helper()
		var v struct{ Version json.Number }
		if err := json.Unmarshal(r.Body, &v); err != nil || r.Status != http.StatusOK {
			t.Fatalf("a write: %d %s", r.Status, r.Body)
		}
		return v.Version
	}
	v1 := version(c.Do(t, http.MethodPost, kpath(ns, ""), kjson(t, map[string]any{"source_uri": "tables/orders.csv", "content": csv})))
	datasetsAt := func() (map[string]any, json.Number) {
		t.Helper()
		r := c.Do(t, http.MethodGet, kpath(ns, "/datasets?source_uri="+url.QueryEscape("tables/orders.csv")), nil)
		if r.Status != http.StatusOK {
			t.Fatalf("knowledge.dataset_get: %d %s", r.Status, r.Body)
		}
		return r.JSON(t), version(r)
	}
	datasets := func() map[string]any { d, _ := datasetsAt(); return d }
	d, at := datasetsAt()
	list := d["datasets"].([]any)
	if at != v1 || d["version_text"] != string(v1) || len(list) != 1 {
		t.Fatalf("knowledge.dataset_get = %v, want one dataset at version %v", d, v1)
	}
	ds := list[0].(map[string]any)
	var types []string
	for _, col := range ds["schema"].(map[string]any)["columns"].([]any) {
		types = append(types, col.(map[string]any)["name"].(string)+":"+col.(map[string]any)["type"].(string))
	}
	if ds["dataset_id"] != "table-1" || ds["rows"] != 3.0 || ds["approval"] != nil ||
		!reflect.DeepEqual(types, []string{"id:int", "city:string", "qty:int", "day:date", "note:string"}) {
		t.Fatalf("the dataset = %v (columns %v)", ds, types)
	}

	query := func(q map[string]any) *testenv.Response {
		return c.Do(t, http.MethodPost, kpath(ns, "/datasets:query"), kjson(t, map[string]any{
			"source_uri": "tables/orders.csv", "dataset_id": "table-1", "query": q}))
	}
	approve := func(version json.Number) *testenv.Response {
		return c.Do(t, http.MethodPost, kpath(ns, "/datasets:approve"), kjson(t, map[string]any{
			"source_uri": "tables/orders.csv", "dataset_id": "table-1", "version": version}))
	}
	wantStatus := func(what string, r *testenv.Response, status int, code string) {
		t.Helper()
		if r.Status != status || (code != "" && r.ErrorCode() != code) {
			t.Fatalf("%s: %d %s, want %d %s", what, r.Status, r.Body, status, code)
		}
	}
	countOslo := map[string]any{"filters": []any{map[string]any{"column": "city", "op": "eq", "value": "Oslo"}},
		"aggregates": []any{map[string]any{"fn": "count"}, map[string]any{"fn": "sum", "column": "qty"}}}
	wantStatus("a query before any approval", query(countOslo), http.StatusConflict, "PRECONDITION_FAILED")

	r := approve(v1)
	wantStatus("knowledge.dataset_approve", r, http.StatusOK, "")
	if a := r.JSON(t); a["dataset_id"] != "table-1" || a["approved_by"] == "" {
		t.Fatalf("the approval = %s", r.Body)
	}
	if a := datasets()["datasets"].([]any)[0].(map[string]any)["approval"]; a == nil {
		t.Fatal("dataset_get does not show the approval")
	}
	wantStatus("approving the same version again", approve(v1), http.StatusOK, "")

	r = query(countOslo)
	wantStatus("a query of the approved dataset", r, http.StatusOK, "")
	if ans := r.JSON(t); !reflect.DeepEqual(ans["columns"], []any{"count", "sum(qty)"}) || !reflect.DeepEqual(ans["rows"], []any{[]any{2.0, 8.0}}) {
		t.Fatalf("count and sum of Oslo's rows = %s", r.Body)
	}
	// An injection string is a cell like any other, and a query's value is a value.
	r = query(map[string]any{"filters": []any{map[string]any{"column": "note", "op": "eq", "value": injection}}, "group_by": []any{"id"}})
	if wantStatus("a query naming the injection cell", r, http.StatusOK, ""); !reflect.DeepEqual(r.JSON(t)["rows"], []any{[]any{3.0}}) {
		t.Fatalf("the injection cell = %s", r.Body)
	}
	r = query(map[string]any{"filters": []any{map[string]any{"column": "city", "op": "eq", "value": "Oslo' OR '1'='1"}}, "aggregates": []any{map[string]any{"fn": "count"}}})
	if wantStatus("a query with an injection value", r, http.StatusOK, ""); !reflect.DeepEqual(r.JSON(t)["rows"], []any{[]any{0.0}}) {
		t.Fatalf("an injection value matched rows: %s", r.Body)
	}
	r = query(map[string]any{"filters": []any{map[string]any{"column": "qty", "op": "gt", "value": "1 OR 1=1"}}})
	if wantStatus("a string for a number", r, http.StatusUnprocessableEntity, "VALIDATION_FAILED"); r.JSON(t)["error"].(map[string]any)["field"] != "query.filters[0].value" {
		t.Fatalf("the refusal names %s", r.Body)
	}

	// A new version: the approval was of v1, so the query waits for a new one, and an
	// approval of v1 (reviewed before the upsert) is refused with nothing written.
	v2 := version(c.Do(t, http.MethodPut, kpath(ns, ""), kjson(t, map[string]any{"source_uri": "tables/orders.csv",
		"content": csv + "4,Bergen,2,2024-03-01,late\n"})))
	wantStatus("a query after the head moved", query(countOslo), http.StatusConflict, "PRECONDITION_FAILED")
	wantStatus("an approval of the version the head moved past", approve(v1), http.StatusConflict, "PRECONDITION_FAILED")
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.knowledge_datasets WHERE org = $1 AND namespace = $2`, org, ns); n != 1 {
		t.Fatalf("%d catalog rows after a refused approval, want the first one alone", n)
	}
	wantStatus("an approval of the new version", approve(v2), http.StatusOK, "")
	r = query(map[string]any{"aggregates": []any{map[string]any{"fn": "count"}}})
	if wantStatus("a query of the new version", r, http.StatusOK, ""); version(r) != v2 || !reflect.DeepEqual(r.JSON(t)["rows"], []any{[]any{4.0}}) {
		t.Fatalf("count at the new version = %s", r.Body)
	}
	wantStatus("an unknown dataset", c.Do(t, http.MethodPost, kpath(ns, "/datasets:approve"), kjson(t, map[string]any{
		"source_uri": "tables/orders.csv", "dataset_id": "table-9", "version": v2})), http.StatusNotFound, "RESOURCE_NOT_FOUND")

	// A deleted head refuses an approval of its last version.
	c.Do(t, http.MethodDelete, kpath(ns, "/document?source_uri=tables/orders.csv"), nil)
	wantStatus("an approval of a deleted document", approve(v2), http.StatusConflict, "PRECONDITION_FAILED")

	// The namespace's erasure takes the catalog, and an approval of the erased version
	// is refused.
	c.Do(t, http.MethodPost, kpath(ns, "/document:restore"), kjson(t, map[string]any{"source_uri": "tables/orders.csv"}))
	census := c.Erase(t, map[string]any{"namespace": ns})["census"].(map[string]any)
	if n, ok := census["pg:loom.knowledge_datasets"]; !ok || n != 0.0 {
		t.Errorf("census of loom.knowledge_datasets: %v (present %t)", n, ok)
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.knowledge_datasets WHERE org = $1 AND namespace = $2`, org, ns); n != 0 {
		t.Errorf("%d catalog rows left after the erasure", n)
	}
	wantStatus("an approval of an erased document", approve(v2), http.StatusConflict, "PRECONDITION_FAILED")
}

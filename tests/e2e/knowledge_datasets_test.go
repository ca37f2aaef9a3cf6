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
	_, c, org := env.SharedOrgAPI(t)
	ns := testenv.Unique(t, "kds")
	const injection = `'; DROP TABLE loom.knowledge_datasets; --`
	csv := "id,city,qty,day,note\n" +
		"1,Oslo,3,2024-01-02,first\n" +
		"2,Bergen,1,2024-01-03,\n" +
		"3,Oslo,5,2024-02-01,\"" + injection + "\"\n"
	k := &ordersDataset{t: t, c: c, ns: ns}
	v1 := k.version(c.Do(t, http.MethodPost, kpath(ns, ""), kjson(t, map[string]any{"source_uri": "tables/orders.csv", "content": csv})))
	ordersDatasetProposesItsSchema(t, k, v1)

	countOslo := map[string]any{"filters": []any{map[string]any{"column": "city", "op": "eq", "value": "Oslo"}},
		"aggregates": []any{map[string]any{"fn": "count"}, map[string]any{"fn": "sum", "column": "qty"}}}
	k.wantStatus("a query before any approval", k.query(countOslo), http.StatusConflict, "PRECONDITION_FAILED")
	ordersDatasetApprovedAndQueried(t, k, v1, countOslo, injection)
	v2 := ordersDatasetHeadMovesPastTheApproval(t, k, org, csv, v1, countOslo)
	ordersDatasetDeletedAndErasedRefuseApprovals(t, k, org, v2)
}

// ordersDataset is the orders.csv table of TestKnowledgeDatasetsApproveAndQuery, with
// the reads and writes its steps share.
type ordersDataset struct {
	t  *testing.T
	c  *testenv.Client
	ns string
}

// version reads a write's version. Versions are nanoseconds, past a float64's exact
// integers: read them as numbers.
func (k *ordersDataset) version(r *testenv.Response) json.Number {
	k.t.Helper()
	var v struct{ Version json.Number }
	if err := json.Unmarshal(r.Body, &v); err != nil || r.Status != http.StatusOK {
		k.t.Fatalf("a write: %d %s", r.Status, r.Body)
	}
	return v.Version
}

// datasetsAt answers knowledge.dataset_get of the table and the version it read.
func (k *ordersDataset) datasetsAt() (map[string]any, json.Number) {
	k.t.Helper()
	r := k.c.Do(k.t, http.MethodGet, kpath(k.ns, "/datasets?source_uri="+url.QueryEscape("tables/orders.csv")), nil)
	if r.Status != http.StatusOK {
		k.t.Fatalf("knowledge.dataset_get: %d %s", r.Status, r.Body)
	}
	return r.JSON(k.t), k.version(r)
}

func (k *ordersDataset) datasets() map[string]any { d, _ := k.datasetsAt(); return d }

func (k *ordersDataset) query(q map[string]any) *testenv.Response {
	return k.c.Do(k.t, http.MethodPost, kpath(k.ns, "/datasets:query"), kjson(k.t, map[string]any{
		"source_uri": "tables/orders.csv", "dataset_id": "table-1", "query": q}))
}

func (k *ordersDataset) approve(version json.Number) *testenv.Response {
	return k.c.Do(k.t, http.MethodPost, kpath(k.ns, "/datasets:approve"), kjson(k.t, map[string]any{
		"source_uri": "tables/orders.csv", "dataset_id": "table-1", "version": version}))
}

func (k *ordersDataset) wantStatus(what string, r *testenv.Response, status int, code string) {
	k.t.Helper()
	if r.Status != status || (code != "" && r.ErrorCode() != code) {
		k.t.Fatalf("%s: %d %s, want %d %s", what, r.Status, r.Body, status, code)
	}
}

// ordersDatasetProposesItsSchema checks dataset_get at v1 proposes the one table with
// its typed columns and no approval yet.
func ordersDatasetProposesItsSchema(t *testing.T, k *ordersDataset, v1 json.Number) {
	d, at := k.datasetsAt()
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
}

// ordersDatasetApprovedAndQueried approves v1 (twice, idempotently) and queries it:
// aggregates answer, and injection strings are read as cells and values.
func ordersDatasetApprovedAndQueried(t *testing.T, k *ordersDataset, v1 json.Number, countOslo map[string]any, injection string) {
	r := k.approve(v1)
	k.wantStatus("knowledge.dataset_approve", r, http.StatusOK, "")
	if a := r.JSON(t); a["dataset_id"] != "table-1" || a["approved_by"] == "" {
		t.Fatalf("the approval = %s", r.Body)
	}
	if a := k.datasets()["datasets"].([]any)[0].(map[string]any)["approval"]; a == nil {
		t.Fatal("dataset_get does not show the approval")
	}
	k.wantStatus("approving the same version again", k.approve(v1), http.StatusOK, "")

	r = k.query(countOslo)
	k.wantStatus("a query of the approved dataset", r, http.StatusOK, "")
	if ans := r.JSON(t); !reflect.DeepEqual(ans["columns"], []any{"count", "sum(qty)"}) || !reflect.DeepEqual(ans["rows"], []any{[]any{2.0, 8.0}}) {
		t.Fatalf("count and sum of Oslo's rows = %s", r.Body)
	}
	// An injection string is a cell like any other, and a query's value is a value.
	r = k.query(map[string]any{"filters": []any{map[string]any{"column": "note", "op": "eq", "value": injection}}, "group_by": []any{"id"}})
	if k.wantStatus("a query naming the injection cell", r, http.StatusOK, ""); !reflect.DeepEqual(r.JSON(t)["rows"], []any{[]any{3.0}}) {
		t.Fatalf("the injection cell = %s", r.Body)
	}
	r = k.query(map[string]any{"filters": []any{map[string]any{"column": "city", "op": "eq", "value": "Oslo' OR '1'='1"}}, "aggregates": []any{map[string]any{"fn": "count"}}})
	if k.wantStatus("a query with an injection value", r, http.StatusOK, ""); !reflect.DeepEqual(r.JSON(t)["rows"], []any{[]any{0.0}}) {
		t.Fatalf("an injection value matched rows: %s", r.Body)
	}
	r = k.query(map[string]any{"filters": []any{map[string]any{"column": "qty", "op": "gt", "value": "1 OR 1=1"}}})
	if k.wantStatus("a string for a number", r, http.StatusUnprocessableEntity, "VALIDATION_FAILED"); r.JSON(t)["error"].(map[string]any)["field"] != "query.filters[0].value" {
		t.Fatalf("the refusal names %s", r.Body)
	}
}

// ordersDatasetHeadMovesPastTheApproval writes v2: queries wait for its approval, an
// approval of v1 is refused with nothing written, and v2's approval serves queries.
// It returns v2 for the deletion and erasure step.
func ordersDatasetHeadMovesPastTheApproval(t *testing.T, k *ordersDataset, org, csv string, v1 json.Number, countOslo map[string]any) json.Number {
	// A new version: the approval was of v1, so the query waits for a new one, and an
	// approval of v1 (reviewed before the upsert) is refused with nothing written.
	v2 := k.version(k.c.Do(t, http.MethodPut, kpath(k.ns, ""), kjson(t, map[string]any{"source_uri": "tables/orders.csv",
		"content": csv + "4,Bergen,2,2024-03-01,late\n"})))
	k.wantStatus("a query after the head moved", k.query(countOslo), http.StatusConflict, "PRECONDITION_FAILED")
	k.wantStatus("an approval of the version the head moved past", k.approve(v1), http.StatusConflict, "PRECONDITION_FAILED")
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.knowledge_datasets WHERE org = $1 AND namespace = $2`, org, k.ns); n != 1 {
		t.Fatalf("%d catalog rows after a refused approval, want the first one alone", n)
	}
	k.wantStatus("an approval of the new version", k.approve(v2), http.StatusOK, "")
	r := k.query(map[string]any{"aggregates": []any{map[string]any{"fn": "count"}}})
	if k.wantStatus("a query of the new version", r, http.StatusOK, ""); k.version(r) != v2 || !reflect.DeepEqual(r.JSON(t)["rows"], []any{[]any{4.0}}) {
		t.Fatalf("count at the new version = %s", r.Body)
	}
	k.wantStatus("an unknown dataset", k.c.Do(t, http.MethodPost, kpath(k.ns, "/datasets:approve"), kjson(t, map[string]any{
		"source_uri": "tables/orders.csv", "dataset_id": "table-9", "version": v2})), http.StatusNotFound, "RESOURCE_NOT_FOUND")
	return v2
}

// ordersDatasetDeletedAndErasedRefuseApprovals deletes the document, then restores and
// erases the namespace: each refuses an approval of v2, and the erasure takes the catalog.
func ordersDatasetDeletedAndErasedRefuseApprovals(t *testing.T, k *ordersDataset, org string, v2 json.Number) {
	// A deleted head refuses an approval of its last version.
	k.c.Do(t, http.MethodDelete, kpath(k.ns, "/document?source_uri=tables/orders.csv"), nil)
	k.wantStatus("an approval of a deleted document", k.approve(v2), http.StatusConflict, "PRECONDITION_FAILED")

	// The namespace's erasure takes the catalog, and an approval of the erased version
	// is refused.
	k.c.Do(t, http.MethodPost, kpath(k.ns, "/document:restore"), kjson(t, map[string]any{"source_uri": "tables/orders.csv"}))
	census := k.c.Erase(t, map[string]any{"namespace": k.ns})["census"].(map[string]any)
	if n, ok := census["pg:loom.knowledge_datasets"]; !ok || n != 0.0 {
		t.Errorf("census of loom.knowledge_datasets: %v (present %t)", n, ok)
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.knowledge_datasets WHERE org = $1 AND namespace = $2`, org, k.ns); n != 0 {
		t.Errorf("%d catalog rows left after the erasure", n)
	}
	k.wantStatus("an approval of an erased document", k.approve(v2), http.StatusConflict, "PRECONDITION_FAILED")
}

package e2e

import (
	"context"
	"testing"
)

// notOrgFirst are the tenant tables keyed otherwise, each for a reason of how it is read.
var notOrgFirst = map[string]string{
	"api_tokens":          "a token is found by its id before its org is known",
	"consolidation_runs":  "a run is read by its random id, always with its org",
	"search_pages":        "a parked page is read by its random id, always with its org",
	"search_traces":       "a trace is read by its random id, always with its org",
	"worker_items":        "the workers' queue is claimed across orgs by worker and due time",
	"projection_failures": "a projection's dead letters are read by projection across orgs",
}

// Every Postgres table that holds an org's rows is keyed org-first, as the seeds key
// every tenant table (issue 33, contradiction 12: the outbox and the projection
// watermarks were not): its primary key starts with org, so one org's rows are one
// range of the key. The few keyed otherwise say why (notOrgFirst).
func TestEveryTenantTableIsKeyedOrgFirst(t *testing.T) {
	pool := env.PG(t)
	rows, err := pool.Query(context.Background(), `
		SELECT c.relname, coalesce((SELECT a.attname FROM pg_index i
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
			WHERE i.indrelid = c.oid AND i.indisprimary), '')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'loom' AND c.relkind = 'r'
		  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'org' AND NOT a.attisdropped)
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var table, first string
		if err := rows.Scan(&table, &first); err != nil {
			t.Fatal(err)
		}
		n++
		if first != "org" && notOrgFirst[table] == "" {
			t.Errorf("loom.%s holds an org's rows but its primary key starts with %q, not org", table, first)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("found %d tenant tables: is the schema there?", n)
	}
}

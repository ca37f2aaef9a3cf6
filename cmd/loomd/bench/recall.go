package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomplane/loom/client"
)

// recallTurns is the turns the recall scenario keeps: the 10k, in sessions of
// recallSessionTurns, one memory.observe a session.
const (
	recallTurns        = 10000
	recallSessionTurns = 100
)

// observeSessions keeps n turns of one user (bench-user) in ns with memory.observe,
// one call a session of recallSessionTurns, and answers their ids in order.
func (r *runner) observeSessions(ctx context.Context, ns string, n int) ([]string, error) {
	var turnIDs []string
	for session := 0; session*recallSessionTurns < n; session++ {
		req := client.ObserveRequest{Identity: client.Identity{UserID: "bench-user", SessionID: fmt.Sprintf("s%04d", session)}}
		for i := 0; i < min(recallSessionTurns, n-session*recallSessionTurns); i++ {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			req.Turns = append(req.Turns, client.ObservedTurn{Role: role, Content: sentence(r.rng)})
		}
		var kept *client.ObserveAnswer
		if err := r.retrying(ctx, func() (err error) {
			kept, err = r.api.Observe(ctx, ns, req)
			return err
		}); err != nil {
			return nil, fmt.Errorf("observing turns into %s: %w", ns, err)
		}
		for _, t := range kept.Turns {
			turnIDs = append(turnIDs, t.TurnID)
		}
	}
	return turnIDs, nil
}

// recall measures memory.recall by a question (a lexical match over the scope's
// recent turns, each hit opened with its neighbour window) at 10k kept turns against
// a primary-key read of one turn row with pgx, same run; and reports what a turn costs
// in Postgres.
func (r *runner) recall(ctx context.Context) (*ScenarioResult, error) {
	res := &ScenarioResult{
		Title:    fmt.Sprintf("memory.recall latency at %d turns of one user", recallTurns),
		Baseline: "a primary-key SELECT of one turn row (loom.memory_evidence) with pgx, at the same concurrency, same run",
		Notes: []string{fmt.Sprintf("the turns are kept with memory.observe, one call a session of %d; a recall asks a 4-word "+
			"question with top_k 5 and a window of 2", recallSessionTurns),
			"recall's question matches over the scope's 5,000 most recent turns by their blind index of terms (a GIN index): it walks the " +
				"5,000 turns' index entries for the cut, reads the rows of those sharing a term, and opens only the hits' windows"},
	}
	ns := r.namespace("recall", fmt.Sprint(recallTurns))
	turnIDs, err := r.observeSessions(ctx, ns, recallTurns)
	if err != nil {
		return nil, err
	}
	if len(turnIDs) != recallTurns {
		return nil, fmt.Errorf("kept %d turns, want %d", len(turnIDs), recallTurns)
	}
	// Autovacuum analyzes a table that grew this much within about a minute; the
	// scenario measures that steady state, not plans made on the empty table's
	// statistics (a stale row count of 1 planned a sort of every turn).
	if _, err := r.t.Process.PG.Exec(ctx, `ANALYZE loom.memory_evidence`); err != nil {
		return nil, fmt.Errorf("analyzing the turns' table: %w", err)
	}
	queries := make([]string, queryPool)
	for i := range queries {
		queries[i] = strings.Join(strings.Fields(sentence(r.rng))[:4], " ")
	}
	top, window := 5, 2
	recallOf := func(q string) client.RecallRequest {
		return client.RecallRequest{Query: q, Identity: client.Identity{UserID: "bench-user"}, TopK: &top, Window: &window}
	}
	if a, err := r.api.Recall(ctx, ns, recallOf(queries[0])); err != nil || len(a.Hits) == 0 {
		return nil, fmt.Errorf("a warm-up recall of %s answered %+v (err %v): the scenario would measure empty answers", ns, a, err)
	}
	pool := r.t.Process.PG
	for _, conc := range r.levels(1, 5) {
		name := fmt.Sprintf("%d turns, concurrency=%d", recallTurns, conc)
		rands := r.workerRands(conc)
		loomTrips := r.tripsMark()
		loom, err := r.closedLoop(ctx, "memory.recall "+name, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
			_, err := r.api.Recall(ctx, ns, recallOf(queries[rands[w].IntN(len(queries))]))
			return err
		})
		if err != nil {
			return nil, err
		}
		loomTrips = loomTrips.stop()
		base, err := r.closedLoop(ctx, "primary-key SELECT "+name, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
			var sealed []byte
			err := pool.QueryRow(ctx, `SELECT sealed FROM loom.memory_evidence WHERE org = $1 AND namespace = $2 AND turn_id = $3`,
				r.t.Org, ns, turnIDs[rands[w].IntN(len(turnIDs))]).Scan(&sealed)
			if err != nil {
				return fmt.Errorf("primary-key SELECT: %w", err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		res.compare(name, loom, base, "calls/s")
		res.addTrips(name, loomTrips, loom, tripsMark{}, Sample{})
	}
	res.Notes = append(res.Notes, tripsNote)
	// What a turn costs in Postgres: its row as stored (pg_column_size of the row, the
	// sealed text and wrapped key included), beside the bytes of text it holds.
	var rowBytes, textBytes float64
	if err := pool.QueryRow(ctx, `SELECT avg(pg_column_size(e.*))::float8, avg(octet_length(e.sealed))::float8
		FROM loom.memory_evidence e WHERE org = $1 AND namespace = $2`, r.t.Org, ns).Scan(&rowBytes, &textBytes); err != nil {
		return nil, fmt.Errorf("measuring the turns' rows: %w", err)
	}
	var total, rows float64
	if err := pool.QueryRow(ctx, `SELECT pg_total_relation_size('loom.memory_evidence')::float8, count(*)::float8
		FROM loom.memory_evidence`).Scan(&total, &rows); err != nil {
		return nil, fmt.Errorf("measuring the turns' table: %w", err)
	}
	res.add("Postgres bytes per turn", "row bytes (Loom) vs sealed text bytes (baseline)", round(rowBytes, 0), round(textBytes, 0))
	if rows > 0 {
		res.add("Postgres bytes per turn", "table+indexes bytes per row (Loom) vs row bytes (baseline)", round(total/rows, 0), round(rowBytes, 0))
	}
	// The terms' GIN index (migration 162) is what a question's candidate read walks.
	var termsIndex float64
	if err := pool.QueryRow(ctx, `SELECT coalesce(pg_relation_size(to_regclass('loom.memory_evidence_terms')), 0)::float8`).
		Scan(&termsIndex); err != nil {
		return nil, fmt.Errorf("measuring the turns' terms index: %w", err)
	}
	if rows > 0 {
		res.add("Postgres bytes per turn", "terms GIN index bytes per row (Loom) vs row bytes (baseline)", round(termsIndex/rows, 0), round(rowBytes, 0))
	}
	res.Notes = append(res.Notes, "table+indexes counts every turn of the deployment's loom.memory_evidence, the scenario's "+
		"and any other's, with the table's free space: run the scenario alone for a per-turn figure")
	return res, nil
}

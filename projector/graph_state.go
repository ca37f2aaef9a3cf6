package projector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/graph"
	"github.com/loomplane/loom/internal/tableset"
)

// keySep joins the parts of a relation or pair key the state reads match on with
// has(); no entity name or predicate holds it (they are plain text).
const keySep = "\x1f"

// latest reads a Nullable column as of its row's latest version. argMax skips the rows
// whose argument is NULL, so argMax(col, seq) would answer an older version's value
// where the latest holds NULL (a link restated without dates); a tuple is never NULL.
func latest(col string) string { return "argMax(tuple(" + col + "), seq).1" }

// rowRefCols are a link's row columns, as of its latest version.
const rowRefCols = `argMax(agent, seq), argMax(user_id, seq), argMax(session_id, seq), argMax(memory_key, seq),
	argMax(content_sha256, seq), argMax(memory_type, seq)`

// loadGraphState reads the rest of the part of a namespace's graph a batch's records
// fold over, as of just before the first of them, once loadRowLinks read the links of
// the records' rows into st: the relations and pairs those links and the records name.
// Its reads run at once, over the tables of st's set. Records that name no entity and
// no relation, over rows that hold no link, read nothing here.
func loadGraphState(ctx context.Context, conn *ch.Conn, st *stateLoader, k nsKey, recs []graph.Record) (*graph.State, error) {
	cutoff := recs[0].Seq
	relations, pairs := st.st.Touched(recs)
	var reads []func() error
	if len(relations) > 0 {
		keys := make([]string, len(relations))
		for i, r := range relations {
			keys[i] = r[0] + keySep + r[1]
		}
		byRelation := fmt.Sprintf(`has(?, concat(subject, '\x1F', predicate)) AND seq < %d`, cutoff)
		for _, part := range keysPerRead(keys) {
			reads = append(reads,
				func() error { return readObservations(ctx, conn, st, k, byRelation, part) },
				func() error { return readTripleLinks(ctx, conn, st, k, byRelation, part) })
		}
	}
	if len(pairs) > 0 {
		keys := make([]string, len(pairs))
		for i, p := range pairs {
			keys[i] = p.A + keySep + p.B
		}
		byPair := fmt.Sprintf(`has(?, concat(entity_a, '\x1F', entity_b)) AND seq < %d`, cutoff)
		for _, part := range keysPerRead(keys) {
			reads = append(reads,
				func() error { return readEdges(ctx, conn, st, k, byPair, part) },
				// Every row that ever named a pair, holding it or not: the edge's weight.
				func() error { return readEdgeLinks(ctx, conn, st, k, byPair, "", part) })
		}
	}
	if err := all(reads...); err != nil {
		return nil, err
	}
	return st.st, nil
}

// graphKeyBytesPerRead bounds the relation or pair keys one graph state read names, in
// bytes. The driver binds them into the statement's text (quoted, a quote or backslash
// escaped: at most twice their length), and ClickHouse parses at most max_query_size
// (256 KiB) of it: one row of 32 entities of 200 bytes names 496 pairs, ~200 kB, and a
// batch of such rows was refused ("Max query size exceeded") at every attempt, holding
// its namespace for ever. Each key's observations and links are read by the one read
// naming it, so the reads' answers add up.
const graphKeyBytesPerRead = 96 << 10

// keysPerRead splits keys into reads of at most graphKeyBytesPerRead bytes each.
func keysPerRead(keys []string) [][]string {
	var out [][]string
	start, size := 0, 0
	for i, k := range keys {
		if size+len(k) > graphKeyBytesPerRead && i > start {
			out = append(out, keys[start:i])
			start, size = i, 0
		}
		size += len(k) + 4 // quotes and a comma
	}
	return append(out, keys[start:])
}

// rowLinksPerRead bounds the namespaces one read of loadRowLinks names.
const rowLinksPerRead = 64

// rowLinksIDsPerRead bounds the row ids one read of loadRowLinks sends. They go as an
// external table (rowLinksTable), not in the statement's text, which ClickHouse would
// parse literal by literal (a fifth of its CPU in a replay's batch, and a statement
// of more than about 6,500 ids was refused as over max_query_size): this bounds only
// the table's size, above a replay batch's rows.
const rowLinksIDsPerRead = 20000

// rowLinksTable names the external table of a read's rows.
const rowLinksTable = "loom_batch_rows"

// rowLinksWhere names a read's namespaces once, for the primary key, its rows through
// rowLinksTable, and the seq each namespace's read stops below as an array looked up
// by namespace: one predicate, where a predicate per namespace OR-ed together cost
// ClickHouse 18.16 12 ms of CPU to analyse at 32 namespaces against 4.6 (empty tables;
// 230 ms against 120 over 200,000 rows, where each row was tested against every
// namespace's branch).
const rowLinksWhere = `(org, namespace) IN (?) AND concat(org, '\x1F', namespace, '\x1F', toString(memory_id)) IN ` + rowLinksTable + `
	AND seq < arrayElement(?, indexOf(?, concat(org, '\x1F', namespace)))`

// withRows is ctx carrying rows as the external table rowLinksTable, of one column.
func withRows(ctx context.Context, rows []string) (context.Context, error) {
	t, err := ext.NewTable(rowLinksTable, ext.Column("row", "String"))
	if err != nil {
		return nil, fmt.Errorf("make the external table of the batch's rows: %w", err)
	}
	if _, err := t.Block().Columns[0].Append(rows); err != nil {
		return nil, fmt.Errorf("fill the external table of the batch's rows: %w", err)
	}
	return clickhouse.Context(ctx, clickhouse.WithExternalTable(t)), nil
}

// rowLinksRead is what one read of loadRowLinks names: namespaces, the seq each reads
// below, and their rows (org, namespace and memory id joined by keySep).
type rowLinksRead struct {
	spaces  []clickhouse.GroupSet
	names   []string
	cutoffs []uint64
	rows    []string
}

func (r *rowLinksRead) add(k nsKey, cutoff uint64, ids []string) {
	name := k.org + keySep + k.namespace
	r.spaces = append(r.spaces, clickhouse.GroupSet{Value: []any{k.org, k.namespace}})
	r.names = append(r.names, name)
	r.cutoffs = append(r.cutoffs, cutoff)
	for _, id := range ids {
		r.rows = append(r.rows, name+keySep+id)
	}
}

// loadRowLinks reads, for every namespace of a batch at once, the links its records'
// rows hold as of just before its first record (the fact links and the edge links),
// into a fresh state per namespace. A statement per namespace cost ClickHouse two
// reads for each namespace a batch touched: a batch of writes spread over 32
// namespaces read 64 times where one namespace's read twice (docs/bench/RESULTS-write.md).
// A namespace with more rows than one read names is read in several: a link is its
// row's, so the reads' answers add up.
func loadRowLinks(ctx context.Context, conn *ch.Conn, set tableset.Set, keys []nsKey, recs map[nsKey][]graph.Record) (map[nsKey]*stateLoader, error) {
	out := make(map[nsKey]*stateLoader, len(keys))
	for _, k := range keys {
		out[k] = &stateLoader{st: graph.NewState(), set: set}
	}
	var next rowLinksRead
	read := func() error {
		if len(next.names) == 0 {
			return nil
		}
		r := next
		next = rowLinksRead{}
		args := []any{r.spaces, r.cutoffs, r.names}
		// A table for each statement: the two are sent at once.
		readWith := func(links func(context.Context, *ch.Conn, tableset.Set, string, []any, map[nsKey]*stateLoader) error) error {
			rctx, err := withRows(ctx, r.rows)
			if err != nil {
				return err
			}
			return links(rctx, conn, set, rowLinksWhere, args, out)
		}
		return all(func() error { return readWith(readRowTripleLinks) }, func() error { return readWith(readRowEdgeLinks) })
	}
	for _, k := range keys {
		for rows := graph.RowIDs(recs[k]); len(rows) > 0; {
			if len(next.names) == rowLinksPerRead || len(next.rows) == rowLinksIDsPerRead {
				if err := read(); err != nil {
					return nil, err
				}
			}
			n := min(len(rows), rowLinksIDsPerRead-len(next.rows))
			next.add(k, recs[k][0].Seq, rows[:n])
			rows = rows[n:]
		}
	}
	if err := read(); err != nil {
		return nil, err
	}
	return out, nil
}

// readRowTripleLinks reads the fact links still held by the rows where names, into
// their namespaces' states.
func readRowTripleLinks(ctx context.Context, conn *ch.Conn, set tableset.Set, where string, args []any, into map[nsKey]*stateLoader) error {
	q := `SELECT org, namespace, subject, predicate, object, toString(memory_id), argMax(observed_seq, seq), ` + latest("stated_from") + `,
			` + latest("stated_to") + `, ` + rowRefCols + `
		FROM ` + set.Qualified("entity_triple_rows") + ` WHERE ` + where + `
		GROUP BY org, namespace, subject, predicate, object, memory_id HAVING argMax(holds, seq) = 1`
	err := conn.Each(conn.Ctx(ctx), q, args, func(scan func(...any) error) error {
		var k nsKey
		l := graph.TripleLink{Holds: true}
		r := &l.Row
		if err := scan(&k.org, &k.namespace, &l.Subject, &l.Predicate, &l.Object, &r.MemoryID, &l.ObservedSeq, &l.StatedFrom, &l.StatedTo,
			&r.Agent, &r.UserID, &r.SessionID, &r.MemoryKey, &r.ContentSHA256, &r.MemoryType); err != nil {
			return err
		}
		l.StatedFrom, l.StatedTo = utc(l.StatedFrom), utc(l.StatedTo)
		if st := into[k]; st != nil {
			st.load(func(s *graph.State) { s.LoadTripleLink(l) })
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the rows' fact links: %w", err)
	}
	return nil
}

// readRowEdgeLinks reads the edge links still held by the rows where names, into
// their namespaces' states.
func readRowEdgeLinks(ctx context.Context, conn *ch.Conn, set tableset.Set, where string, args []any, into map[nsKey]*stateLoader) error {
	q := `SELECT org, namespace, entity_a, entity_b, toString(memory_id), argMax(opened_seq, seq), ` + rowRefCols + `
		FROM ` + set.Qualified("entity_edge_rows") + ` WHERE ` + where + `
		GROUP BY org, namespace, entity_a, entity_b, memory_id HAVING argMax(holds, seq) = 1`
	err := conn.Each(conn.Ctx(ctx), q, args, func(scan func(...any) error) error {
		var k nsKey
		l := graph.EdgeLink{Holds: true}
		r := &l.Row
		if err := scan(&k.org, &k.namespace, &l.A, &l.B, &r.MemoryID, &l.OpenedSeq,
			&r.Agent, &r.UserID, &r.SessionID, &r.MemoryKey, &r.ContentSHA256, &r.MemoryType); err != nil {
			return err
		}
		if st := into[k]; st != nil {
			st.load(func(s *graph.State) { s.LoadEdgeLink(l) })
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the rows' edge links: %w", err)
	}
	return nil
}

// stateLoader lets concurrent reads of one set's graph tables load into one State.
type stateLoader struct {
	mu  sync.Mutex
	st  *graph.State
	set tableset.Set
}

func (l *stateLoader) load(f func(*graph.State)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(l.st)
}

// all runs fns at once and returns their errors.
func all(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func readObservations(ctx context.Context, conn *ch.Conn, st *stateLoader, k nsKey, where string, keys []string) error {
	q := `SELECT subject, predicate, object, observed_seq, argMax(cardinality, seq), argMax(valid_from, seq),
			` + latest("valid_to") + `, ` + latest("stated_from") + `, ` + latest("stated_to") + `, ` + latest("invalid_at") + `,
			argMax(seen_us, seq), argMax(restored, seq), argMax(fallback, seq)
		FROM ` + st.set.Qualified("entity_triples") + ` PREWHERE org = ? AND namespace = ? WHERE ` + where + `
		GROUP BY subject, predicate, object, observed_seq`
	err := conn.Each(conn.Ctx(ctx), q, []any{k.org, k.namespace, keys}, func(scan func(...any) error) error {
		var o graph.Observation
		var seenUS uint64
		var restored, fallback uint8
		if err := scan(&o.Subject, &o.Predicate, &o.Object, &o.ObservedSeq, &o.Cardinality, &o.ValidFrom, &o.ValidTo,
			&o.StatedFrom, &o.StatedTo, &o.InvalidAt, &seenUS, &restored, &fallback); err != nil {
			return err
		}
		o.ValidFrom = o.ValidFrom.UTC()
		o.ValidTo, o.StatedFrom, o.StatedTo, o.InvalidAt = utc(o.ValidTo), utc(o.StatedFrom), utc(o.StatedTo), utc(o.InvalidAt)
		o.SeenUS, o.Restored, o.Fallback = int64(seenUS), restored == 1, fallback == 1
		st.load(func(s *graph.State) { s.LoadObservation(o) })
		return nil
	})
	if err != nil {
		return fmt.Errorf("read observations: %w", err)
	}
	return nil
}

// readTripleLinks reads the links still holding their fact.
func readTripleLinks(ctx context.Context, conn *ch.Conn, st *stateLoader, k nsKey, where string, keys []string) error {
	q := `SELECT subject, predicate, object, toString(memory_id), argMax(observed_seq, seq), ` + latest("stated_from") + `,
			` + latest("stated_to") + `, ` + rowRefCols + `
		FROM ` + st.set.Qualified("entity_triple_rows") + ` PREWHERE org = ? AND namespace = ? WHERE ` + where + `
		GROUP BY subject, predicate, object, memory_id HAVING argMax(holds, seq) = 1`
	err := conn.Each(conn.Ctx(ctx), q, []any{k.org, k.namespace, keys}, func(scan func(...any) error) error {
		l := graph.TripleLink{Holds: true}
		r := &l.Row
		if err := scan(&l.Subject, &l.Predicate, &l.Object, &r.MemoryID, &l.ObservedSeq, &l.StatedFrom, &l.StatedTo,
			&r.Agent, &r.UserID, &r.SessionID, &r.MemoryKey, &r.ContentSHA256, &r.MemoryType); err != nil {
			return err
		}
		l.StatedFrom, l.StatedTo = utc(l.StatedFrom), utc(l.StatedTo)
		st.load(func(s *graph.State) { s.LoadTripleLink(l) })
		return nil
	})
	if err != nil {
		return fmt.Errorf("read fact links: %w", err)
	}
	return nil
}

func readEdges(ctx context.Context, conn *ch.Conn, st *stateLoader, k nsKey, where string, keys []string) error {
	q := `SELECT entity_a, entity_b, opened_seq, argMax(valid_from, seq), ` + latest("valid_to") + `, argMax(weight, seq)
		FROM ` + st.set.Qualified("entity_edges") + ` PREWHERE org = ? AND namespace = ? WHERE ` + where + `
		GROUP BY entity_a, entity_b, opened_seq`
	err := conn.Each(conn.Ctx(ctx), q, []any{k.org, k.namespace, keys}, func(scan func(...any) error) error {
		var e graph.Edge
		if err := scan(&e.A, &e.B, &e.OpenedSeq, &e.ValidFrom, &e.ValidTo, &e.Weight); err != nil {
			return err
		}
		e.ValidFrom, e.ValidTo = e.ValidFrom.UTC(), utc(e.ValidTo)
		st.load(func(s *graph.State) { s.LoadEdge(e) })
		return nil
	})
	if err != nil {
		return fmt.Errorf("read edges: %w", err)
	}
	return nil
}

func readEdgeLinks(ctx context.Context, conn *ch.Conn, st *stateLoader, k nsKey, where, having string, keys []string) error {
	q := `SELECT entity_a, entity_b, toString(memory_id), argMax(opened_seq, seq), argMax(holds, seq), ` + rowRefCols + `
		FROM ` + st.set.Qualified("entity_edge_rows") + ` PREWHERE org = ? AND namespace = ? WHERE ` + where + `
		GROUP BY entity_a, entity_b, memory_id ` + having
	err := conn.Each(conn.Ctx(ctx), q, []any{k.org, k.namespace, keys}, func(scan func(...any) error) error {
		var l graph.EdgeLink
		var holds uint8
		r := &l.Row
		if err := scan(&l.A, &l.B, &r.MemoryID, &l.OpenedSeq, &holds,
			&r.Agent, &r.UserID, &r.SessionID, &r.MemoryKey, &r.ContentSHA256, &r.MemoryType); err != nil {
			return err
		}
		l.Holds = holds == 1
		st.load(func(s *graph.State) { s.LoadEdgeLink(l) })
		return nil
	})
	if err != nil {
		return fmt.Errorf("read edge links: %w", err)
	}
	return nil
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

package projector

import (
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

const (
	columnsEntities  = `org, namespace, name, user_id, alias, entity_type, seq, seen_at`
	columnsSightings = `org, namespace, name, user_id, alias, entity_type, memory_id, seq`
	columnsTriples   = `org, namespace, subject, predicate, object, observed_seq, seq,
		cardinality, valid_from, valid_to, stated_from, stated_to, invalid_at, seen_at, seen_us, restored, fallback, committed_at`
	columnsTripleRows = `org, namespace, subject, predicate, object, memory_id, seq,
		observed_seq, holds, agent, user_id, session_id, memory_key, content_sha256, memory_type, stated_from, stated_to,
		committed_at`
	columnsEdges = `org, namespace, entity_a, entity_b, opened_seq, seq, valid_from, valid_to,
		weight, committed_at`
	columnsEdgeRows = `org, namespace, entity_a, entity_b, memory_id, seq, opened_seq, holds,
		agent, user_id, session_id, memory_key, content_sha256, memory_type, committed_at`
)

// graphInsert is one graph table's insert: the table, its columns, and its fill when
// the batch has rows for it.
type graphInsert struct {
	table, columns string
	fill           func(driver.Batch) error
}

// graphInserts are the batch's graph inserts, one per table that has rows.
func graphInserts(gs []nsGraph) []graphInsert {
	var n [6]int
	for _, g := range gs {
		n[0] += len(g.rows.Sightings)
		n[5] += len(g.rows.Sightings)
		n[1] += len(g.rows.Observations)
		n[2] += len(g.rows.TripleLinks)
		n[3] += len(g.rows.Edges)
		n[4] += len(g.rows.EdgeLinks)
	}
	all := []graphInsert{
		{"entities", columnsEntities, fillEach(gs, func(g *nsGraph, b driver.Batch) error {
			for _, v := range g.rows.Sightings {
				s := v.Row
				if err := b.Append(g.org, g.namespace, s.Name, s.UserID, s.Alias, s.Type, v.Seq, v.At); err != nil {
					return err
				}
			}
			return nil
		})},
		{"entity_triples", columnsTriples, fillEach(gs, func(g *nsGraph, b driver.Batch) error {
			for _, v := range g.rows.Observations {
				o := v.Row
				seen := time.UnixMicro(o.SeenUS).UTC()
				if err := b.Append(g.org, g.namespace, o.Subject, o.Predicate, o.Object, o.ObservedSeq, v.Seq, o.Cardinality,
					seconds(o.ValidFrom), secondsPtr(o.ValidTo), secondsPtr(o.StatedFrom), secondsPtr(o.StatedTo),
					secondsPtr(o.InvalidAt), seconds(seen), uint64(o.SeenUS), b2u(o.Restored), b2u(o.Fallback), v.At); err != nil {
					return err
				}
			}
			return nil
		})},
		{"entity_triple_rows", columnsTripleRows, fillEach(gs, func(g *nsGraph, b driver.Batch) error {
			for _, v := range g.rows.TripleLinks {
				l, r := v.Row, v.Row.Row
				if err := b.Append(g.org, g.namespace, l.Subject, l.Predicate, l.Object, mustUUID(r.MemoryID), v.Seq,
					l.ObservedSeq, b2u(l.Holds), r.Agent, r.UserID, r.SessionID, r.MemoryKey, r.ContentSHA256, r.MemoryType,
					secondsPtr(l.StatedFrom), secondsPtr(l.StatedTo), v.At); err != nil {
					return err
				}
			}
			return nil
		})},
		{"entity_edges", columnsEdges, fillEach(gs, func(g *nsGraph, b driver.Batch) error {
			for _, v := range g.rows.Edges {
				e := v.Row
				if err := b.Append(g.org, g.namespace, e.A, e.B, e.OpenedSeq, v.Seq, seconds(e.ValidFrom), secondsPtr(e.ValidTo),
					e.Weight, v.At); err != nil {
					return err
				}
			}
			return nil
		})},
		{"entity_edge_rows", columnsEdgeRows, fillEach(gs, func(g *nsGraph, b driver.Batch) error {
			for _, v := range g.rows.EdgeLinks {
				l, r := v.Row, v.Row.Row
				if err := b.Append(g.org, g.namespace, l.A, l.B, mustUUID(r.MemoryID), v.Seq, l.OpenedSeq, b2u(l.Holds),
					r.Agent, r.UserID, r.SessionID, r.MemoryKey, r.ContentSHA256, r.MemoryType, v.At); err != nil {
					return err
				}
			}
			return nil
		})},
		// The same sightings as entities, each kept beside the others by its record: what a
		// redaction reads to take only what its versions declared (017_entity_sightings.sql).
		{"entity_sightings", columnsSightings, fillEach(gs, func(g *nsGraph, b driver.Batch) error {
			for _, v := range g.rows.Sightings {
				s := v.Row
				if err := b.Append(g.org, g.namespace, s.Name, s.UserID, s.Alias, s.Type, mustUUID(s.MemoryID), v.Seq); err != nil {
					return err
				}
			}
			return nil
		})},
	}
	var out []graphInsert
	for i, ins := range all {
		if n[i] > 0 {
			out = append(out, ins)
		}
	}
	return out
}

func fillEach(gs []nsGraph, fill func(*nsGraph, driver.Batch) error) func(driver.Batch) error {
	return func(b driver.Batch) error {
		for i := range gs {
			if err := fill(&gs[i], b); err != nil {
				return err
			}
		}
		return nil
	}
}

// graphRowCount is the number of graph rows a batch writes.
func graphRowCount(gs []nsGraph) int {
	n := 0
	for _, g := range gs {
		n += g.rows.Len()
	}
	return n
}

package command

import (
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/loomplane/loom/internal/memrow"
)

// BenchmarkErasedLinkArgs builds and encodes the commit's erased-link check for a write
// in conflict with 13 peers whose conflict_with lists hold 22 ids each (the peers
// scenario's mean at 10,000 memories): the ids it binds, as pgx sends them.
func BenchmarkErasedLinkArgs(b *testing.B) {
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = uuid.NewString()
		}
		return out
	}
	own := &pending{own: true, row: &memrow.Row{MemoryID: uuid.NewString(), ConflictWith: ids(13)}}
	rows := []*pending{own}
	for _, id := range own.row.ConflictWith {
		rows = append(rows, &pending{row: &memrow.Row{MemoryID: id, ConflictWith: append(ids(21), own.row.MemoryID)}})
	}
	m := pgtype.NewMap()
	sd := &pgconn.StatementDescription{ParamOIDs: []uint32{pgtype.TextOID, pgtype.TextOID, pgtype.UUIDArrayOID, pgtype.Int8OID}}
	var eqb pgx.ExtendedQueryBuilder
	b.ReportAllocs()
	for b.Loop() {
		uuids := parseIDs(linkedIDs(rows))
		if err := eqb.Build(m, sd, []any{"org", "ns", uuids, int64(1)}); err != nil {
			b.Fatal(err)
		}
	}
}

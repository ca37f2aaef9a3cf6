package projector

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/tableset"
	"github.com/loomplane/loom/internal/text"
)

// insertInto is the insert statement of table in set with its column list.
func insertInto(set tableset.Set, table, columns string) string {
	return "INSERT INTO " + set.Qualified(table) + " (" + columns + ")"
}

// writeRows sends one insert per table, all at once: the tables are independent
// and each collapses a row it sees twice, so a batch that fails part-way is simply
// written again. audits are the rows' audit rows and those of records that project
// nothing else (a redaction); graphRows the batch's folded graph rows. Every insert
// goes to the tables of set; the lexical rows' terms are stemmed through stems.
func writeRows(ctx context.Context, conn *ch.Conn, set tableset.Set, rows []opened, audits []*auditRow, graphRows []nsGraph, stems *text.Stems) error {
	var inserts []func() error
	insert := func(table, columns string, fill func(driver.Batch) error) {
		inserts = append(inserts, func() error { return send(ctx, conn, set.Qualified(table), insertInto(set, table, columns), fill) })
	}
	if len(rows) > 0 {
		inserts = append(inserts,
			func() error { return sendTyped(ctx, conn, set, "memory", memoryColumns(), rows) },
			func() error { return sendTyped(ctx, conn, set, "memory_versions", versionsColumns(), rows) },
			func() error { return sendTyped(ctx, conn, set, "memory_embeddings", embeddingsColumns(), rows) },
			func() error {
				return sendTyped(ctx, conn, set, "memory_lexical", lexicalColumns(), lexicalRows(rows, stems))
			})
	}
	if len(audits) > 0 {
		inserts = append(inserts, func() error { return sendTyped(ctx, conn, set, "audit_log", auditColumns(), audits) })
	}
	if fill, any := chunksFill(rows); any {
		insert("memory_chunks", columnsChunks, fill)
	}
	for _, g := range graphInserts(graphRows) {
		insert(g.table, g.columns, g.fill)
	}
	errs := make([]error, len(inserts))
	var wg sync.WaitGroup
	for i, insert := range inserts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = insert()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// flushRows is how many rows an insert's block takes before it is sent on, within the
// same INSERT. The row path (the chunks, the graph) grows the driver's columns one value
// at a time, and a block sent keeps its columns' capacity when it is reset, so the rows
// past the first flushRows fill it without growing it again; the typed path
// (fillTyped) builds and hands over a share of this many rows at a time, its buffers
// the size of one share. The server squashes an INSERT's blocks into one part
// (min_insert_block_size_rows), so the parts budget is unchanged.
const flushRows = 500

// flushing is an insert's batch that sends its block every flushRows rows.
type flushing struct {
	driver.Batch
	rows int
}

func (f *flushing) Append(v ...any) error {
	if err := f.Batch.Append(v...); err != nil {
		return err
	}
	if f.rows++; f.rows%flushRows == 0 {
		return f.Flush()
	}
	return nil
}

func send(ctx context.Context, conn *ch.Conn, table, query string, fill func(driver.Batch) error) error {
	prepared, err := conn.PrepareBatch(ctx, query)
	if err != nil {
		return fmt.Errorf("prepare insert into %s: %w", table, err)
	}
	b := &flushing{Batch: prepared}
	if err := fill(b); err != nil {
		b.Abort()
		return fmt.Errorf("build insert into %s: %w", table, err)
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert into %s: %w", table, err)
	}
	return nil
}

func sensitivity(v *events.Revision) string {
	if v.Sensitivity == "" {
		return "normal"
	}
	return v.Sensitivity
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func mustUUID(s string) uuid.UUID {
	u, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil
	}
	return u
}

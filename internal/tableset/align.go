package tableset

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomplane/loom/internal/ch"
)

// Column is a projection table's column as system.columns describes it.
type Column struct {
	Name, Type string
	// DefaultKind is DEFAULT, MATERIALIZED, ALIAS or "" (none); DefaultExpr its expression.
	DefaultKind, DefaultExpr string
}

// Align gives every set's copy of a projection table the columns the serving table
// has and the copy lacks. A ClickHouse migration alters the serving tables only; a
// set that existed when it ran (a rebuild under way across an upgrade, a set kept
// after a switch) was copied from the definition before it. Without this the
// projector's insert into a rebuilt set that becomes the serving one, and an
// erasure's mutation naming the new column in a kept set, fail. Migrations only add
// columns, so adding them in the serving table's order is the whole of it; it is
// idempotent and cheap (one read of system.columns), so every boot runs it after the
// migrations.
func Align(ctx context.Context, conn *ch.Conn) ([]string, error) {
	cols, err := readColumns(ctx, conn)
	if err != nil {
		return nil, err
	}
	var done []string
	for _, table := range Projection() {
		serving, ok := cols[Serving().Name(table)]
		if !ok {
			continue
		}
		for name, copyCols := range cols {
			t, s, ok := Parse(name)
			if !ok || t != table || s.IsServing() {
				continue
			}
			for _, stmt := range AlignStatements(s.Qualified(table), serving, copyCols) {
				if err := conn.Exec(conn.Ctx(ctx), ch.ClusterDDL(stmt, conn.Cluster)); err != nil {
					return done, fmt.Errorf("align %s with the serving table: %w", s.Qualified(table), err)
				}
				done = append(done, stmt)
			}
		}
	}
	return done, nil
}

// AlignStatements are the ALTERs that add to the table named qualified the columns of
// serving it lacks, each after the column that precedes it in serving.
func AlignStatements(qualified string, serving, have []Column) []string {
	present := make(map[string]bool, len(have))
	for _, c := range have {
		present[c.Name] = true
	}
	var out []string
	for i, c := range serving {
		if present[c.Name] {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "ALTER TABLE %s ADD COLUMN %s %s", qualified, quoteIdent(c.Name), c.Type)
		if c.DefaultKind != "" {
			fmt.Fprintf(&b, " %s %s", c.DefaultKind, c.DefaultExpr)
		}
		if i > 0 {
			fmt.Fprintf(&b, " AFTER %s", quoteIdent(serving[i-1].Name))
		}
		out = append(out, b.String())
		present[c.Name] = true
	}
	return out
}

// readColumns are the columns of the projection tables of every set, by table name,
// in each table's order (system.columns lists a table's columns as defined).
func readColumns(ctx context.Context, conn *ch.Conn) (map[string][]Column, error) {
	out := map[string][]Column{}
	err := conn.Each(ctx, `SELECT table, name, type, default_kind, default_expression
		FROM system.columns WHERE database = ?`, []any{ch.Database}, func(scan func(dest ...any) error) error {
		var table string
		var c Column
		if err := scan(&table, &c.Name, &c.Type, &c.DefaultKind, &c.DefaultExpr); err != nil {
			return err
		}
		if _, _, ok := Parse(table); ok {
			out[table] = append(out[table], c)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the projection tables' columns: %w", err)
	}
	return out, nil
}

func quoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "\\`") + "`"
}

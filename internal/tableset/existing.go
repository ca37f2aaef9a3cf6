package tableset

import (
	"context"
	"fmt"
	"sort"

	"github.com/loomplane/loom/internal/ch"
)

// Present is a set that exists and which of its projection tables it holds (a set a
// rebuild is still creating, or one a drop stopped half-way, may lack some).
type Present struct {
	Set    Set
	Tables map[string]bool
}

// Has reports whether the set holds table.
func (p Present) Has(table string) bool { return p.Tables[table] }

// Existing lists the sets of projection tables ClickHouse holds, the serving set
// first, then by generation.
func Existing(ctx context.Context, conn *ch.Conn) ([]Present, error) {
	rows, err := conn.Query(conn.Ctx(ctx), `SELECT name FROM system.tables WHERE database = ?`, ch.Database)
	if err != nil {
		return nil, fmt.Errorf("list the projection tables: %w", err)
	}
	defer rows.Close()
	sets := map[Set]map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("list the projection tables: %w", err)
		}
		if table, s, ok := Parse(name); ok {
			if sets[s] == nil {
				sets[s] = map[string]bool{}
			}
			sets[s][table] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the projection tables: %w", err)
	}
	out := make([]Present, 0, len(sets))
	for s, tables := range sets {
		out = append(out, Present{Set: s, Tables: tables})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Set.Gen < out[j].Set.Gen })
	return out, nil
}

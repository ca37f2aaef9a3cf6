package command

import (
	"context"
	"fmt"
	"sort"

	"github.com/loomplane/loom/internal/erasure"
)

// census counts, per counted table of both stores (the registry), the rows of a
// saga's scope below its fences that still hold content, zeros included.
func (s *Service) census(ctx context.Context, sg *erasureSaga) (map[string]int64, error) {
	out := map[string]int64{}
	scopes := pgScopes()
	tables := make([]string, 0, len(scopes))
	for t := range scopes {
		tables = append(tables, t)
		out[erasure.Table{Store: erasure.Postgres, Name: t}.Key()] = 0
	}
	sort.Strings(tables)
	for _, t := range erasure.Tables() {
		if t.Store == erasure.ClickHouse && t.Class == erasure.Counted {
			out[t.Key()] = 0
		}
	}
	for _, f := range sg.fences() {
		args := []any{f.Org, f.Namespace, f.UserID, f.Seq, sg.ID}
		for _, table := range tables {
			n, err := s.countResidue(ctx, table, scopes[table], args)
			if err != nil {
				return nil, fmt.Errorf("count the erasure's residue in %s: %w", table, err)
			}
			out[erasure.Table{Store: erasure.Postgres, Name: table}.Key()] += n
		}
		counts, err := erasure.Count(ctx, s.ch, f)
		if err != nil {
			return nil, err
		}
		for k, n := range counts {
			out[k] += n
		}
	}
	return out, nil
}

package ch

import (
	"context"
	"fmt"
	"time"
)

// Mutation is one ALTER TABLE … DELETE or UPDATE of a Loom table: the portable form
// both 18.16 and current servers run (18.16 has no lightweight DELETE). Values are
// bound (the driver quotes them as literals); Where never holds a subquery, which a
// replicated table refuses in a mutation.
type Mutation struct {
	Table string // without the database: "memory"
	// Set is the UPDATE assignment list ("value = '', redacted = 1"); empty: DELETE.
	Set   string
	Where string
	Args  []any
}

func (m Mutation) statement() string {
	if m.Set == "" {
		return fmt.Sprintf("ALTER TABLE %s.%s DELETE WHERE %s", Database, m.Table, m.Where)
	}
	return fmt.Sprintf("ALTER TABLE %s.%s UPDATE %s WHERE %s", Database, m.Table, m.Set, m.Where)
}

// Mutate runs m when rows match it and waits until the server has applied it to
// every part. It counts the matching rows first, with the same bound predicate: a
// mutation whose predicate 18.16 cannot evaluate never finishes and holds every later
// mutation of the table back (18.16 has no KILL MUTATION), so a predicate is proven by
// a SELECT before it is ever submitted; and nothing to change submits nothing. It
// returns how many rows matched. A replicated table replicates the mutation itself:
// it runs on the one server the connection reached.
func (c *Conn) Mutate(ctx context.Context, m Mutation) (uint64, error) {
	var n uint64
	q := fmt.Sprintf("SELECT count() FROM %s.%s WHERE %s", Database, m.Table, m.Where)
	if err := c.QueryRow(c.Ctx(ctx), q, m.Args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the rows to mutate in %s: %w", m.Table, err)
	}
	if n == 0 {
		return 0, nil
	}
	if err := c.Exec(c.Ctx(ctx), m.statement(), m.Args...); err != nil {
		return n, fmt.Errorf("mutate %s: %w", m.Table, err)
	}
	if err := c.waitMutations(ctx, m.Table); err != nil {
		return n, err
	}
	return n, nil
}

// waitMutations waits until every mutation of table submitted up to now is done.
// Mutations apply in order, so one submitted later never holds an earlier one back.
func (c *Conn) waitMutations(ctx context.Context, table string) error {
	var upTo time.Time
	if err := c.QueryRow(ctx, "SELECT now()").Scan(&upTo); err != nil {
		return fmt.Errorf("read the server's time: %w", err)
	}
	for {
		var pending uint64
		err := c.QueryRow(ctx, `SELECT count() FROM system.mutations
			WHERE database = ? AND table = ? AND is_done = 0 AND create_time <= ?`, Database, table, upTo).Scan(&pending)
		if err != nil {
			return fmt.Errorf("read the pending mutations of %s: %w", table, err)
		}
		if pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the mutations of %s: %w", table, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

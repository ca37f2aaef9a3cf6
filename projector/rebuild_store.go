package projector

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/tableset"
	"github.com/loomplane/loom/internal/watermarks"
)

// TablesState is loom.projection_tables: the generation of the projection tables that
// serves, the one a rebuild is building (0: none) and for which projection, and the
// ones kept after a switch.
type TablesState struct {
	Serving     int    `json:"serving"`
	Building    int    `json:"building,omitempty"`
	BuildingFor string `json:"building_for,omitempty"`
	Retired     []int  `json:"retired"`
	Next        int    `json:"next"`
}

// ReadTablesState reads the generations of the projection tables.
func ReadTablesState(ctx context.Context, pool *pgxpool.Pool) (TablesState, error) {
	return readTablesState(ctx, pool, "")
}

func readTablesState(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, lock string) (TablesState, error) {
	var s TablesState
	var building *int32
	var buildingFor *string
	var retired []int32
	err := q.QueryRow(ctx, `SELECT serving, building, building_for, retired, next FROM loom.projection_tables `+lock).
		Scan(&s.Serving, &building, &buildingFor, &retired, &s.Next)
	if err != nil {
		return s, fmt.Errorf("read the projection tables' generations: %w", err)
	}
	if building != nil {
		s.Building = int(*building)
	}
	if buildingFor != nil {
		s.BuildingFor = *buildingFor
	}
	s.Retired = make([]int, len(retired))
	for i, g := range retired {
		s.Retired[i] = int(g)
	}
	return s, nil
}

// ErrOtherRebuild: a rebuild of another projection is under way; one set of tables
// is built at a time.
var ErrOtherRebuild = errors.New("a rebuild of another projection is under way")

// beginBuild returns the generation a rebuild of projection builds: the one under way
// for it, or a new one, recorded, whose number is never handed out again.
func beginBuild(ctx context.Context, pool *pgxpool.Pool, projection string) (TablesState, error) {
	var s TablesState
	err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		var err error
		if s, err = readTablesState(ctx, tx, "FOR UPDATE"); err != nil {
			return err
		}
		if s.Building != 0 {
			if s.BuildingFor != projection {
				return fmt.Errorf("%w: generation %d for projection %q (abandon it first)", ErrOtherRebuild, s.Building, s.BuildingFor)
			}
			return nil
		}
		s.Building, s.BuildingFor = s.Next, projection
		s.Next++
		_, err = tx.Exec(ctx, `UPDATE loom.projection_tables SET building = $1, building_for = $2, building_since = now(),
			next = $3, updated_at = now()`, s.Building, projection, s.Next)
		return err
	})
	if err != nil {
		return s, fmt.Errorf("begin a rebuild of projection %s: %w", projection, err)
	}
	return s, nil
}

// BuildDistance is how far a building projection stands from the serving one: the
// namespaces where its watermark is behind, by how many seqs in all, and the sum of
// its own watermarks, which grows while it applies records.
type BuildDistance = watermarks.Distance

// MeasureBuild reads the building projection's distance from the serving one.
func MeasureBuild(ctx context.Context, pool *pgxpool.Pool, serving, building string) (BuildDistance, error) {
	d, err := watermarks.Measure(ctx, pool, serving, building)
	if err != nil {
		return d, fmt.Errorf("compare the watermarks of %s and %s: %w", building, serving, err)
	}
	return d, nil
}

// recordSwitch makes the built generation the serving one, once ClickHouse has
// renamed its tables: the serving projection takes the built one's watermarks (never
// lower than its own) and its recorded failures (its own concerned tables that no
// longer serve), and the old generation is kept as retired.
func recordSwitch(ctx context.Context, pool *pgxpool.Pool, s TablesState, built string) error {
	err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		watermarks.QueueAdopt(b, s.BuildingFor, built)
		b.Queue(`DELETE FROM loom.projection_failures WHERE projection = $1`, s.BuildingFor)
		b.Queue(`UPDATE loom.projection_failures SET projection = $1 WHERE projection = $2`, s.BuildingFor, built)
		b.Queue(`UPDATE loom.projection_tables SET serving = building, building = NULL, building_for = NULL,
			building_since = NULL, retired = array_append(retired, serving), switched_at = now(), updated_at = now()
			WHERE building = $1`, s.Building)
		watermarks.QueueNotify(b, s.BuildingFor)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("record generation %d as serving: %w", s.Building, err)
	}
	return nil
}

// forgetBuild clears an abandoned rebuild: its projection's watermarks and failures,
// and the record of it.
func forgetBuild(ctx context.Context, pool *pgxpool.Pool, s TablesState, built string) error {
	err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		watermarks.QueueForget(b, built)
		b.Queue(`DELETE FROM loom.projection_failures WHERE projection = $1`, built)
		b.Queue(`UPDATE loom.projection_tables SET building = NULL, building_for = NULL, building_since = NULL,
			updated_at = now() WHERE building = $1`, s.Building)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("forget the rebuild of generation %d: %w", s.Building, err)
	}
	return nil
}

// forgetRetired records that generation gen's tables are dropped.
func forgetRetired(ctx context.Context, pool *pgxpool.Pool, gen int) error {
	if _, err := pool.Exec(ctx, `UPDATE loom.projection_tables SET retired = array_remove(retired, $1), updated_at = now()`, gen); err != nil {
		return fmt.Errorf("record generation %d dropped: %w", gen, err)
	}
	return nil
}

// createSet creates set's copy of every projection table it lacks, from the serving
// table's own definition, so a copy has the columns every applied migration gave it.
func (r *Rebuilder) createSet(ctx context.Context, set tableset.Set) error {
	conn := r.conn
	for _, table := range tableset.Projection() {
		var show string
		if err := conn.QueryRow(conn.Ctx(ctx), "SHOW CREATE TABLE "+tableset.Serving().Qualified(table)).Scan(&show); err != nil {
			return fmt.Errorf("read the definition of %s: %w", table, err)
		}
		ddl, err := copyDDL(show, table, set)
		if err != nil {
			return err
		}
		if err := r.patientDDL(ctx, ch.ClusterDDL(ddl, conn.Cluster)); err != nil {
			return fmt.Errorf("create %s: %w", set.Qualified(table), err)
		}
	}
	return nil
}

var (
	createHead = regexp.MustCompile("(?is)^\\s*CREATE\\s+TABLE\\s+(?:IF\\s+NOT\\s+EXISTS\\s+)?`?" + ch.Database + "`?\\.`?([A-Za-z0-9_]+)`?(?:\\s+UUID\\s+'[^']*')?")
	// A replicated table's Keeper path names its table (ch.ClusterDDL); a copy
	// replicates under its own name's path, never reused.
	keeperPath = regexp.MustCompile(`'(/clickhouse/tables/\{shard\}/` + ch.Database + `/)([A-Za-z0-9_]+)'`)
)

// copyDDL rewrites the CREATE statement of a serving table (SHOW CREATE TABLE) into
// one that creates its copy in set, if it does not exist.
func copyDDL(show, table string, set tableset.Set) (string, error) {
	m := createHead.FindStringSubmatchIndex(show)
	if m == nil || show[m[2]:m[3]] != table {
		return "", fmt.Errorf("the definition of %s is not its CREATE TABLE: %.80q", table, show)
	}
	ddl := "CREATE TABLE IF NOT EXISTS " + set.Qualified(table) + show[m[1]:]
	return keeperPath.ReplaceAllString(ddl, "'${1}"+set.Name(table)+"'"), nil
}

// swapStatement renames the serving tables to retired's names and built's tables to
// the serving names, for every table not yet swapped (a swap stopped half-way is
// finished, never reversed), in one statement; "" when none is left.
func swapStatement(existing []tableset.Present, retired, built tableset.Set, cluster string) string {
	has := func(s tableset.Set, table string) bool {
		for _, p := range existing {
			if p.Set == s {
				return p.Has(table)
			}
		}
		return false
	}
	serving := tableset.Serving()
	var pairs []string
	for _, table := range tableset.Projection() {
		if !has(built, table) {
			continue
		}
		if has(serving, table) {
			pairs = append(pairs, fmt.Sprintf("%s TO %s", serving.Qualified(table), retired.Qualified(table)))
		}
		pairs = append(pairs, fmt.Sprintf("%s TO %s", built.Qualified(table), serving.Qualified(table)))
	}
	if len(pairs) == 0 {
		return ""
	}
	stmt := "RENAME TABLE " + strings.Join(pairs, ", ")
	if cluster != "" {
		stmt += " ON CLUSTER '" + cluster + "'"
	}
	return stmt
}

// dropSet drops every table of set that exists.
func (r *Rebuilder) dropSet(ctx context.Context, set tableset.Set) error {
	for _, table := range tableset.Projection() {
		if err := r.patientDDL(ctx, ch.ClusterDDL("DROP TABLE IF EXISTS "+set.Qualified(table), r.conn.Cluster)); err != nil {
			return fmt.Errorf("drop %s: %w", set.Qualified(table), err)
		}
	}
	return nil
}

// ddlPatience bounds how long a rebuild keeps sending a DDL statement ClickHouse does
// not answer in time: a DROP of a large table, or any DDL on a loaded server, can
// outlast the connection's read timeout while the server carries on with it. Every
// statement sent this way is idempotent (IF EXISTS, IF NOT EXISTS, the renames still
// to do, read again), so sending it again is safe; the server runs one at a time per table.
const ddlPatience = 10 * time.Minute

// patiently runs ddl again while ClickHouse is unavailable or slow to answer, for up
// to ddlPatience.
func (r *Rebuilder) patiently(ctx context.Context, ddl func() error) error {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval, bo.MaxInterval, bo.MaxElapsedTime = time.Second, 15*time.Second, ddlPatience
	for {
		err := ddl()
		if err == nil || !ch.Unavailable(err) {
			return err
		}
		wait := bo.NextBackOff()
		if wait == backoff.Stop {
			return err
		}
		r.log.Warn("rebuild: ClickHouse did not answer a statement; sending it again", "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// patientDDL runs the idempotent statement stmt patiently.
func (r *Rebuilder) patientDDL(ctx context.Context, stmt string) error {
	return r.patiently(ctx, func() error { return r.conn.Exec(r.conn.Ctx(ctx), stmt) })
}

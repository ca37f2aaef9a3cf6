package projector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/tableset"
)

// A rebuild builds a fresh generation of the projection tables beside the serving
// ones, under a projection (and consumer group) of its own that replays the topic
// from its start, while the serving tables keep answering. Once the new projection
// is consuming and within RebuildOptions.Near seqs of the serving one (under writes
// the two are never measured level), the switch holds the serving projection still
// (the serving tables' lock, which every serving batch holds shared), lets the new one
// catch up with it, stops it, and renames both sets in one statement: the query side reads the new tables from its next statement, and never
// sees a half-built set. The serving projection takes the new one's watermarks; its
// consumers carry on from their own offsets, which are at or behind what the new
// tables hold, and every table collapses what it sees twice. The old set is kept
// under its generation's names until it is dropped on request.
//
// Every step is recorded or found in the stores, so a rebuild stopped at any point
// (even half-way through the rename) resumes where it stood when run again.

// BuildName is the projection (and, through Group, the consumer group) that builds
// generation gen for projection.
func BuildName(projection string, gen int) string { return fmt.Sprintf("%s.g%d", projection, gen) }

// RebuildOptions tune a Rebuilder.
type RebuildOptions struct {
	// Projector and Pipeline are the serving projection's: its batch size, pace,
	// session, name and topic, which the building projection shares.
	Projector config.Projector
	Pipeline  config.Pipeline
	Brokers   []string
	// Progress receives a line when the building projection's distance to the
	// serving one changes, at most every few seconds; nil: no lines.
	Progress io.Writer
	// Hold is how long a switch may hold the serving projection still for the new
	// one to catch up with it before it lets go and tries again later (default 10 s).
	Hold time.Duration
	// Poll is how often the distance is measured (default 1 s).
	Poll time.Duration
	// Near is the distance, in seqs, from which a switch is tried: a projection
	// following a topic that is being written is never exactly level with another
	// one when measured, so the switch holds the serving projection still and lets
	// the building one close the rest (default: one batch, Projector.BatchRows).
	Near int64
}

// Rebuilder builds, switches, abandons and drops generations of the projection tables.
type Rebuilder struct {
	opts RebuildOptions
	pool *pgxpool.Pool
	conn *ch.Conn
	reg  *metrics.Registry
	log  *slog.Logger
}

// NewRebuilder returns a Rebuilder; the building projection registers its metrics in reg.
func NewRebuilder(opts RebuildOptions, pool *pgxpool.Pool, conn *ch.Conn, reg *metrics.Registry, log *slog.Logger) *Rebuilder {
	if opts.Hold <= 0 {
		opts.Hold = 10 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.Near <= 0 {
		opts.Near = int64(max(opts.Projector.BatchRows, 1))
	}
	return &Rebuilder{opts: opts, pool: pool, conn: conn, reg: reg, log: log}
}

// ErrRebuildRunning: another process is building, abandoning or dropping a generation.
var ErrRebuildRunning = errors.New("another process is rebuilding the projection tables")

// exclusive holds the rebuild lock for fn.
func (r *Rebuilder) exclusive(ctx context.Context, fn func() error) error {
	unlock, ok, err := pg.TrySessionLock(ctx, r.pool, pg.LockRebuild)
	if err != nil {
		return err
	}
	if !ok {
		return ErrRebuildRunning
	}
	defer unlock()
	return fn()
}

// Build rebuilds the projection tables for the configured projection and switches
// the query side to them: it resumes the rebuild under way for it, or begins one. It
// returns the generations as they stand after the switch.
func (r *Rebuilder) Build(ctx context.Context) (TablesState, error) {
	var after TablesState
	err := r.exclusive(ctx, func() error {
		s, err := beginBuild(ctx, r.pool, r.opts.Pipeline.Projection)
		if err != nil {
			return err
		}
		built, name := tableset.Of(s.Building), BuildName(s.BuildingFor, s.Building)
		existing, err := tableset.Existing(ctx, r.conn)
		if err != nil {
			return err
		}
		if switching(existing, s) {
			fmt.Fprintf(r.opts.Progress, "generation %d: finishing a switch that stopped half-way\n", s.Building)
			if err := r.swap(ctx, s); err != nil {
				return err
			}
		} else {
			if err := r.createSet(ctx, built); err != nil {
				return err
			}
			fmt.Fprintf(r.opts.Progress, "generation %d: building %s.*__g%d with projection %s (group %s) from the topic's start\n",
				s.Building, ch.Database, s.Building, name, Group(name))
			if err := r.buildAndSwitch(ctx, s); err != nil {
				return err
			}
		}
		r.deleteGroup(ctx, Group(name))
		after, err = ReadTablesState(ctx, r.pool)
		return err
	})
	return after, err
}

// switching reports whether a switch to s.Building has begun: the serving
// generation's tables have been renamed to their generation's names.
func switching(existing []tableset.Present, s TablesState) bool {
	for _, p := range existing {
		if p.Set == tableset.Of(s.Serving) && len(p.Tables) > 0 {
			return true
		}
	}
	return false
}

// member is the building projection's consumer, running until it is stopped.
type member struct {
	stop context.CancelFunc
	done chan struct{}
	err  error
}

func (m *member) wait() error {
	m.stop()
	<-m.done
	return m.err
}

// buildAndSwitch runs the building projection until it has caught up with the
// serving one, then switches.
func (r *Rebuilder) buildAndSwitch(ctx context.Context, s TablesState) error {
	name := BuildName(s.BuildingFor, s.Building)
	building := r.opts.Pipeline
	building.Projection = name
	p := New(r.opts.Projector, building, tableset.Of(s.Building), r.pool, r.conn, r.reg, r.log, Faults{})
	mctx, stop := context.WithCancel(ctx)
	m := &member{stop: stop, done: make(chan struct{})}
	go func() { defer close(m.done); m.err = p.RunMember(mctx, r.opts.Brokers) }()
	defer m.wait()

	tick := time.NewTicker(r.opts.Poll)
	defer tick.Stop()
	var said string
	var saidAt, nextTry time.Time
	lastApplied := int64(-1)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.done:
			return fmt.Errorf("the projector of generation %d stopped: %v", s.Building, m.err)
		case <-tick.C:
		}
		d, err := MeasureBuild(ctx, r.pool, s.BuildingFor, name)
		if err != nil {
			return err
		}
		if line := fmt.Sprintf("generation %d: %d namespaces, %d seqs behind the serving tables", s.Building, d.Namespaces, d.Seqs); (line != said && time.Since(saidAt) >= 5*time.Second) || d.Namespaces == 0 {
			fmt.Fprintln(r.opts.Progress, line)
			said, saidAt = line, time.Now()
		}
		// Near enough, and consuming (a resumed build's consumer may still wait for its
		// group to let go of a dead member), the building projection closes the rest
		// while the serving one is held.
		advancing := lastApplied >= 0 && d.Applied > lastApplied
		lastApplied = d.Applied
		if d.Namespaces > 0 && (d.Seqs > r.opts.Near || !advancing || time.Now().Before(nextTry)) {
			continue
		}
		switched, err := r.switchOver(ctx, s, m)
		if err != nil || switched {
			return err
		}
		// Let the serving projection work off what it was held from before holding it again.
		nextTry = time.Now().Add(r.opts.Hold)
		fmt.Fprintf(r.opts.Progress, "generation %d: not level with the serving projection after holding it %s; trying again\n", s.Building, r.opts.Hold)
	}
}

// switchOver holds the serving projection still, waits up to Hold for the building
// one to reach it, stops the building one and swaps the sets. switched is false when
// the building projection did not catch up in time: the serving one is let go.
func (r *Rebuilder) switchOver(ctx context.Context, s TablesState, m *member) (switched bool, err error) {
	unlock, err := pg.SessionLock(ctx, r.pool, pg.LockServingTables)
	if err != nil {
		return false, err
	}
	defer unlock()
	held := time.Now()
	for {
		d, err := MeasureBuild(ctx, r.pool, s.BuildingFor, BuildName(s.BuildingFor, s.Building))
		if err != nil {
			return false, err
		}
		if d.Namespaces == 0 {
			break
		}
		if time.Since(held) > r.opts.Hold {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-m.done:
			return false, fmt.Errorf("the projector of generation %d stopped: %v", s.Building, m.err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	// Nothing may write the new set under its building name once it is renamed.
	if err := m.wait(); err != nil {
		return false, fmt.Errorf("stop the projector of generation %d: %w", s.Building, err)
	}
	if err := r.swap(ctx, s); err != nil {
		return false, err
	}
	fmt.Fprintf(r.opts.Progress, "generation %d serves (the serving projection was held %s); generation %d is kept as %s.*__g%d\n",
		s.Building, time.Since(held).Round(time.Millisecond), s.Serving, ch.Database, s.Serving)
	return true, nil
}

// swap renames the sets (what is left of a rename that stopped half-way) and records
// the switch. The caller holds the serving tables' lock, or finishes a switch whose
// rename began under it.
func (r *Rebuilder) swap(ctx context.Context, s TablesState) error {
	err := r.patiently(ctx, func() error {
		existing, err := tableset.Existing(ctx, r.conn)
		if err != nil {
			return err
		}
		if stmt := swapStatement(existing, tableset.Of(s.Serving), tableset.Of(s.Building), r.conn.Cluster); stmt != "" {
			return r.conn.Exec(r.conn.Ctx(ctx), stmt)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rename generation %d into the serving tables: %w", s.Building, err)
	}
	return recordSwitch(ctx, r.pool, s, BuildName(s.BuildingFor, s.Building))
}

// Abandon drops the generation under way, its projection's watermarks, failures and
// consumer group; the serving tables are untouched. It returns the generation
// abandoned, 0 when none was under way.
func (r *Rebuilder) Abandon(ctx context.Context) (int, error) {
	var gen int
	err := r.exclusive(ctx, func() error {
		s, err := ReadTablesState(ctx, r.pool)
		if err != nil || s.Building == 0 {
			return err
		}
		existing, err := tableset.Existing(ctx, r.conn)
		if err != nil {
			return err
		}
		if switching(existing, s) {
			return fmt.Errorf("the switch to generation %d has begun: run the rebuild again to finish it", s.Building)
		}
		if err := r.dropSet(ctx, tableset.Of(s.Building)); err != nil {
			return err
		}
		name := BuildName(s.BuildingFor, s.Building)
		r.deleteGroup(ctx, Group(name))
		gen = s.Building
		return forgetBuild(ctx, r.pool, s, name)
	})
	return gen, err
}

// DropRetired drops the tables of every generation kept after a switch, and returns
// the generations dropped.
func (r *Rebuilder) DropRetired(ctx context.Context) ([]int, error) {
	var dropped []int
	err := r.exclusive(ctx, func() error {
		s, err := ReadTablesState(ctx, r.pool)
		if err != nil {
			return err
		}
		for _, gen := range s.Retired {
			if err := r.dropSet(ctx, tableset.Of(gen)); err != nil {
				return err
			}
			if err := forgetRetired(ctx, r.pool, gen); err != nil {
				return err
			}
			dropped = append(dropped, gen)
		}
		return nil
	})
	return dropped, err
}

// deleteGroup deletes a building projection's consumer group once nothing consumes
// with it; a group left behind only holds offsets, so failing is logged, not raised.
func (r *Rebuilder) deleteGroup(ctx context.Context, group string) {
	cl, err := kafka.NewClient(r.opts.Brokers)
	if err != nil {
		r.log.Warn("rebuild: delete the building group", "group", group, "err", err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).DeleteGroups(ctx, group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		r.log.Warn("rebuild: delete the building group", "group", group, "err", err)
	}
}

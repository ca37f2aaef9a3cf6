package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/internal/metrics"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/watermarks"
	"github.com/loomplane/loom/projector"
)

func runProjector(ctx context.Context, args []string) error {
	switch {
	case isHelp(args):
		fmt.Printf("Usage:\n%s", usageOf("projector"))
		return errHelpShown
	case len(args) > 0 && args[0] == "reset":
		return runProjectorReset(ctx, args[1:])
	case len(args) > 0 && args[0] == "rebuild":
		return runProjectorRebuild(ctx, args[1:])
	}
	return usageError{errors.New("projector: want `loomd projector reset --group G --to earliest|latest|<RFC3339> [--execute]` or `loomd projector rebuild [--drop-old | --abandon | --drop-retired | --status]`")}
}

// runProjectorRebuild builds a fresh generation of the projection tables beside the
// serving ones and switches the query side to it (projector/rebuild.go), or abandons
// one under way, drops the generations kept after a switch, or shows where they stand.
func runProjectorRebuild(ctx context.Context, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("projector rebuild", flag.ContinueOnError)
	name := fs.String("projection", cfg.Pipeline.Projection, "the projection whose tables are rebuilt")
	dropOld := fs.Bool("drop-old", false, "after the switch, drop the tables that served before it")
	abandon := fs.Bool("abandon", false, "drop the generation under way instead of building it")
	dropRetired := fs.Bool("drop-retired", false, "drop the tables kept after earlier switches, and nothing else")
	status := fs.Bool("status", false, "print the generations and how far a rebuild under way is, and nothing else")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if n := countTrue(*abandon, *dropRetired, *status, *dropOld); n > 1 {
		return usageError{errors.New("projector rebuild: --drop-old, --abandon, --drop-retired and --status go alone")}
	}
	cfg.Pipeline.Projection = *name
	log := newLogger(cfg.LogLevel, os.Stderr)
	n, err := app.Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer n.Close()
	r := projector.NewRebuilder(projector.RebuildOptions{Projector: cfg.Projector, Pipeline: cfg.Pipeline, Brokers: cfg.Kafka.Brokers,
		Progress: os.Stdout}, n.PG, n.CH, metrics.NewRegistry(), log)
	switch {
	case *status:
		return printRebuildStatus(ctx, n, cfg.Pipeline.Projection)
	case *abandon:
		gen, err := r.Abandon(ctx)
		if err == nil {
			fmt.Printf("abandoned generation %d (0: none was under way)\n", gen)
		}
		return err
	case *dropRetired:
		return dropRetiredGenerations(ctx, r)
	}
	s, err := r.Build(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("generation %d serves; kept: %v\n", s.Serving, s.Retired)
	if *dropOld {
		return dropRetiredGenerations(ctx, r)
	}
	return nil
}

func dropRetiredGenerations(ctx context.Context, r *projector.Rebuilder) error {
	dropped, err := r.DropRetired(ctx)
	if err == nil {
		fmt.Printf("dropped generations %v\n", dropped)
	}
	return err
}

func printRebuildStatus(ctx context.Context, n *app.Process, projection string) error {
	s, err := projector.ReadTablesState(ctx, n.PG)
	if err != nil {
		return err
	}
	fmt.Printf("serving generation %d; kept after switches: %v\n", s.Serving, s.Retired)
	if s.Building == 0 {
		fmt.Println("no rebuild under way")
		return nil
	}
	d, err := projector.MeasureBuild(ctx, n.PG, s.BuildingFor, projector.BuildName(s.BuildingFor, s.Building))
	if err != nil {
		return err
	}
	fmt.Printf("building generation %d for projection %s: %d namespaces, %d seqs behind the serving tables\n", s.Building, s.BuildingFor, d.Namespaces, d.Seqs)
	return nil
}

func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// runProjectorReset moves a consumer group's committed offsets, as
// kafka-consumer-groups --reset-offsets does: it prints the plan and changes nothing
// without --execute, and refuses while the group has live members.
func runProjectorReset(ctx context.Context, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("projector reset", flag.ContinueOnError)
	group := fs.String("group", projector.Group(cfg.Pipeline.Projection), "the consumer group")
	topic := fs.String("topic", cfg.Pipeline.Topic, "the topic the group consumes")
	to := fs.String("to", "", "earliest, latest or an RFC 3339 time (required)")
	execute := fs.Bool("execute", false, "move the offsets (without it, only print the plan)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	target, err := projector.ParseResetTarget(*to)
	if err != nil {
		return usageError{err}
	}
	cl, err := kafka.NewClient(cfg.Kafka.Brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	plan, err := projector.PlanReset(ctx, adm, *group, *topic, target)
	if err != nil {
		return err
	}
	if name, ok := strings.CutPrefix(*group, projector.Group("")); ok {
		if err := holdUnapplied(ctx, cfg.PG.DSN, adm, cfg.Kafka.Brokers, name, plan); err != nil {
			return err
		}
	}
	if err := plan.Write(os.Stdout); err != nil {
		return err
	}
	if !*execute {
		fmt.Println("dry run: nothing changed; add --execute to move the offsets")
		return nil
	}
	if err := projector.ExecuteReset(ctx, adm, plan); err != nil {
		return err
	}
	fmt.Println("offsets moved; the group's consumers start from them when they next join")
	return nil
}

// holdUnapplied keeps a reset of projection name's group from skipping records it has
// not applied (projector.HoldUnapplied): that needs its watermarks, from Postgres.
func holdUnapplied(ctx context.Context, dsn string, adm *kadm.Client, brokers []string, name string, plan *projector.ResetPlan) error {
	if dsn == "" {
		return errors.New("projector reset: the group is projection " + name + "'s, and a reset must not skip what it has not applied: set LOOM_PG_DSN so its watermarks can be read")
	}
	pool, err := pg.Open(ctx, pg.PoolConfig{DSN: dsn, MaxConns: 2})
	if err != nil {
		return err
	}
	defer pool.Close()
	marks, err := watermarks.ReadProjection(ctx, pool, name)
	if err != nil {
		return err
	}
	return projector.HoldUnapplied(ctx, adm, brokers, marks, plan)
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/projector"
)

func runProjector(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "reset" {
		return usageError{errors.New("projector: want `loomd projector reset --group G --to earliest|latest|<RFC3339> [--execute]`")}
	}
	return runProjectorReset(ctx, args[1:])
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
	group := fs.String("group", projector.Group(cfg.Projection), "the consumer group")
	topic := fs.String("topic", cfg.Topic, "the topic the group consumes")
	to := fs.String("to", "", "earliest, latest or an RFC 3339 time (required)")
	execute := fs.Bool("execute", false, "move the offsets (without it, only print the plan)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	target, err := projector.ParseResetTarget(*to)
	if err != nil {
		return usageError{err}
	}
	cl, err := kafka.NewClient(cfg.KafkaBrokers)
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

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/internal/atrest"
)

func runRefs(ctx context.Context, args []string) error {
	switch {
	case isHelp(args):
		fmt.Printf("Usage:\n%s", usageOf("refs"))
		return errHelpShown
	case len(args) > 0 && args[0] == "rotate":
		return runRefsRotate(ctx, args[1:])
	}
	return usageError{errors.New("refs: want `loomd refs rotate --org ORG`")}
}

// runRefsRotate rotates one org's user reference key (internal/atrest, refrotate.go):
// a fresh key, every reference column rewritten to it, the org's records republished
// under it, and the old key dropped; a rotation an earlier run left half done is
// finished.
func runRefsRotate(ctx context.Context, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("refs rotate", flag.ContinueOnError)
	org := fs.String("org", "", "the org whose user reference key is replaced (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *org == "" {
		return usageError{errors.New("refs rotate: --org ORG is required")}
	}
	n, err := openCommandSide(ctx, cfg)
	if err != nil {
		return err
	}
	defer n.Close()
	republish := func(ctx context.Context, org string) error {
		res, err := n.Command.Republish(ctx, command.RepublishOptions{Org: org, FromSeq: 1, Topic: cfg.Pipeline.Topic})
		if err == nil {
			fmt.Printf("queued %d records of %d namespaces for %s under the new key\n", res.Records, res.Namespaces, cfg.Pipeline.Topic)
		}
		return err
	}
	r, err := atrest.RotateRefKey(ctx, n.PG, n.Keys, *org, atrest.RefRotationOptions{
		Wait: atrest.RetiredKeyWait(cfg.Command.AdmissionDeadline), Republish: republish})
	if err != nil {
		return err
	}
	printRefRotation(r)
	return nil
}

func printRefRotation(r atrest.RefRotation) {
	if r.Resumed {
		fmt.Printf("finished the rotation an earlier run started for %s\n", r.Org)
	}
	fmt.Printf("the user reference key of %s is now generation %d; %d references mapped, %d turns' terms hashed again\n",
		r.Org, r.Gen, r.Mapped, r.Rehashed)
	for t, n := range r.Rewritten {
		if n > 0 {
			fmt.Printf("  %s: %d rows rewritten\n", t, n)
		}
	}
	for t, n := range r.Deleted {
		if n > 0 {
			fmt.Printf("  %s: %d rows deleted\n", t, n)
		}
	}
	for t, n := range r.Unmapped {
		fmt.Printf("  %s: %d rows name a reference no live user, key, agent or session maps (left)\n", t, n)
	}
	fmt.Println("the retired key is dropped: once LOOM_KEK no longer holds the KEKs it was wrapped under, the old key may be destroyed " +
		"(what it named in dead tuples, the WAL, backups and old topic segments then confirms no guess)")
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/internal/config"
)

// runRepublish re-creates topic records from the Postgres journal and queues them for
// the relay, for a topic that was lost or truncated.
func runRepublish(ctx context.Context, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("republish", flag.ContinueOnError)
	from := fs.Int64("from-seq", 0, "republish every namespace's revisions from this seq on (required, >= 1)")
	ns := fs.String("namespace", "", "only this namespace")
	org := fs.String("org", "", "only this org")
	topic := fs.String("topic", cfg.Pipeline.Topic, "the topic the records are for")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *from < 1 {
		return usageError{errors.New("republish: --from-seq N (N >= 1) is required")}
	}
	n, err := openCommandSide(ctx, cfg)
	if err != nil {
		return err
	}
	defer n.Close()
	res, err := n.Command.Republish(ctx, command.RepublishOptions{Org: *org, Namespace: *ns, FromSeq: *from, Topic: *topic})
	if err != nil {
		return err
	}
	fmt.Printf("queued %d records of %d namespaces for %s; the relay publishes them in seq order (consumers dedupe by seq)\n",
		res.Records, res.Namespaces, *topic)
	return nil
}

// openCommandSide opens a process of the command role alone: an operator command that
// writes records (republish, refs rotate) builds them as a command process builds them.
func openCommandSide(ctx context.Context, cfg config.Config) (*app.Process, error) {
	cfg.Roles = config.Roles{config.RoleCommand}
	return app.Open(ctx, cfg, newLogger(cfg.LogLevel, os.Stderr))
}

package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/config"
)

func runServe(ctx context.Context, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	roles := fs.String("roles", cfg.Roles.String(), "roles to run: command, query, relay, projector (api = command,query)")
	addr := fs.String("addr", cfg.HTTP.Addr, "HTTP listen address (health and metrics on every process)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if cfg.Roles, err = config.ParseRoles(*roles); err != nil {
		return usageError{fmt.Errorf("serve --roles: %w", err)}
	}
	cfg.HTTP.Addr = *addr
	if err := servePprof(cfg.HTTP.PprofAddr); err != nil {
		return err
	}
	paceGC(ctx, cfg.Runtime)
	log := newLogger(cfg.LogLevel, os.Stderr)
	n, err := app.Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer n.Close()
	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTP.Addr, err)
	}
	log.Info("loomd serving", "roles", cfg.Roles, "addr", ln.Addr().String(), "deployment_id", n.DeploymentID, "version", app.Version)
	return n.Run(ctx, ln)
}

func runMigrate(ctx context.Context, args []string) error {
	if err := parseFlags(flag.NewFlagSet("migrate", flag.ContinueOnError), args); err != nil {
		return err
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	cfg.Boot.Migrate = true
	n, err := app.Open(ctx, cfg, newLogger(cfg.LogLevel, os.Stderr))
	if err != nil {
		return err
	}
	n.Close()
	fmt.Println("migrations applied; topic", cfg.Pipeline.Topic, "ready")
	return nil
}

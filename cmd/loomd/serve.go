package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/config"
)

func runServe(ctx context.Context, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	roles := fs.String("roles", strings.Join(cfg.Roles, ","), "roles to run: command, query, relay, projector (api = command,query)")
	addr := fs.String("addr", cfg.HTTPAddr, "HTTP listen address (health and metrics on every process)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if cfg.Roles, err = config.ParseRoles(*roles); err != nil {
		return usageError{fmt.Errorf("serve --roles: %w", err)}
	}
	cfg.HTTPAddr = *addr
	log := newLogger(cfg.LogLevel, os.Stderr)
	n, err := app.Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer n.Close()
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
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
	cfg.BootMigrate = true
	n, err := app.Open(ctx, cfg, newLogger(cfg.LogLevel, os.Stderr))
	if err != nil {
		return err
	}
	n.Close()
	fmt.Println("migrations applied; topic", cfg.Topic, "ready")
	return nil
}

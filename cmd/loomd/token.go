package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/pg"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func runToken(ctx context.Context, args []string) error {
	if isHelp(args) {
		fmt.Printf("Usage:\n%s", usageOf("token"))
		return errHelpShown
	}
	if len(args) == 0 || args[0] != "create" {
		return usageError{errors.New("token: want `loomd token create --org ORG ...`")}
	}
	fs := flag.NewFlagSet("token create", flag.ContinueOnError)
	org := fs.String("org", "", "the org the token acts in (required, unless --operator)")
	operator := fs.Bool("operator", false, "the deployment operator's token: no org, no memory; it resets projections and reads health's details")
	role := fs.String("role", auth.RoleWriter, "admin, writer or reader")
	name := fs.String("name", "", "a label for the token")
	readUser := fs.String("read-user", "", "bind the token to one user's rows")
	var namespaces multiFlag
	fs.Var(&namespaces, "namespace", "a namespace the token reaches (repeat; default: all)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	switch {
	case *operator && (*org != "" || len(namespaces) > 0 || *readUser != ""):
		return usageError{errors.New("token create: an --operator token belongs to no org: it takes no --org, --namespace or --read-user")}
	case *operator:
		*role = auth.RoleOperator
	case *org == "":
		return usageError{errors.New("token create: --org is required (or --operator)")}
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	if cfg.PG.DSN == "" {
		return errors.New("token create needs LOOM_PG_DSN")
	}
	pool, err := pg.Open(ctx, pg.PoolConfig{DSN: cfg.PG.DSN, MaxConns: 2})
	if err != nil {
		return err
	}
	defer pool.Close()
	var ns []string
	if len(namespaces) > 0 {
		ns = namespaces
	}
	secret, p, err := auth.NewStore(pool, cfg.PG.ReadDeadline).Create(ctx, auth.NewToken{Org: *org, Role: *role, Name: *name, Namespaces: ns, ReadUserID: *readUser})
	if err != nil {
		return err
	}
	if p.Operator() {
		fmt.Fprintf(os.Stderr, "operator token %s created; the secret is shown once:\n", p.TokenID)
	} else {
		fmt.Fprintf(os.Stderr, "token %s for org %s (role %s) created; the secret is shown once:\n", p.TokenID, p.Org, p.Role)
	}
	fmt.Println(secret)
	return nil
}

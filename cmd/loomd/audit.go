package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auditchain"
	"github.com/loomplane/loom/internal/config"
)

// errChainBroken is a verification that found a broken link: exit status 1.
var errChainBroken = errors.New("the audit chain is broken")

// runAudit runs `loomd audit verify`.
func runAudit(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "verify" {
		return usageError{errors.New("audit: want `loomd audit verify [--org ORG [--namespace NS]]`")}
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	org := fs.String("org", "", "only this org's chains")
	ns := fs.String("namespace", "", "only this namespace of --org")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if *ns != "" && *org == "" {
		return usageError{errors.New("audit verify: --namespace needs --org")}
	}
	cfg.Roles = config.Roles{}
	n, err := app.Open(ctx, cfg, newLogger(cfg.LogLevel, os.Stderr))
	if err != nil {
		return err
	}
	defer n.Close()
	return auditVerify(ctx, n, *org, *ns, os.Stdout)
}

// auditVerify walks the chains in scope against their checkpoints and prints what it
// walked, or the first broken link (errChainBroken).
func auditVerify(ctx context.Context, n *app.Process, org, ns string, out io.Writer) error {
	rep, err := auditchain.Verify(ctx, n.CH, n.PG, org, ns)
	var brk *auditchain.Break
	if errors.As(err, &brk) {
		fmt.Fprintf(out, "BROKEN: %s\n", brk.Error())
		return fmt.Errorf("%w: %s/%s at seq %d", errChainBroken, brk.Org, brk.Namespace, brk.Seq)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "ok: the audit chains are intact: %d namespaces, %d audit rows (%d written before the chain), %d checkpoints met\n",
		rep.Namespaces, rep.Rows, rep.Legacy, rep.Checkpoints)
	return nil
}

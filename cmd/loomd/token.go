package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/boot"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/userref"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// The token commands touch Postgres alone (loom.api_tokens): they check that it
// records this deployment first (exit 2 when not), and run while ClickHouse is down.
func runToken(ctx context.Context, args []string) error {
	if len(args) == 0 || isHelp(args) {
		fmt.Printf("Usage:\n%s", usageOf("token"))
		if len(args) == 0 {
			return usageError{errors.New("token: want create, list, revoke or rotate")}
		}
		return errHelpShown
	}
	switch args[0] {
	case "create":
		return runTokenCreate(ctx, args[1:])
	case "list":
		return runTokenList(ctx, args[1:])
	case "revoke":
		return runTokenRevoke(ctx, args[1:])
	case "rotate":
		return runTokenRotate(ctx, args[1:])
	}
	return usageError{fmt.Errorf("token: unknown command %q: want create, list, revoke or rotate", args[0])}
}

func runTokenCreate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("token create", flag.ContinueOnError)
	org := fs.String("org", "", "the org the token acts in (required, unless --operator)")
	operator := fs.Bool("operator", false, "the deployment operator's token: no org, no memory; it resets projections and reads health's details")
	role := fs.String("role", auth.RoleWriter, "admin, writer or reader")
	name := fs.String("name", "", "a label for the token")
	readUser := fs.String("read-user", "", "bind the token to one user's rows")
	ownSession := fs.String("own-session", "", "bind the token to one session's rows (the own_session scope)")
	expiresIn := fs.Duration("expires-in", 0, "end the token after this long (e.g. 720h; default: never)")
	var namespaces multiFlag
	fs.Var(&namespaces, "namespace", "a namespace the token reaches (repeat; default: all)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *operator && (*org != "" || len(namespaces) > 0 || *readUser != "" || *ownSession != ""):
		return usageError{errors.New("token create: an --operator token belongs to no org: it takes no --org, --namespace, --read-user or --own-session")}
	case *operator:
		*role = auth.RoleOperator
	case *org == "":
		return usageError{errors.New("token create: --org is required (or --operator)")}
	}
	expiresAt, err := expiryOf(*expiresIn)
	if err != nil {
		return err
	}
	return withTokens(ctx, func(tokens *auth.Store) error {
		var ns []string
		if len(namespaces) > 0 {
			ns = namespaces
		}
		secret, p, err := tokens.Create(ctx, auth.NewToken{Org: *org, Role: *role, Name: *name, Namespaces: ns, ReadUserID: *readUser,
			ReadSessionID: *ownSession, ExpiresAt: expiresAt})
		if err != nil {
			return err
		}
		if p.Operator() {
			fmt.Fprintf(os.Stderr, "operator token %s created%s; the secret is shown once:\n", p.TokenID, expiryNote(expiresAt))
		} else {
			fmt.Fprintf(os.Stderr, "token %s for org %s (role %s) created%s; the secret is shown once:\n", p.TokenID, p.Org, p.Role, expiryNote(expiresAt))
		}
		fmt.Println(secret)
		return nil
	})
}

func runTokenList(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("token list", flag.ContinueOnError)
	org := fs.String("org", "", "only this org's tokens (default: every org's)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return withTokens(ctx, func(tokens *auth.Store) error {
		list, err := tokens.List(ctx, *org)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "TOKEN\tORG\tROLE\tNAME\tNAMESPACES\tREAD USER\tCREATED\tEXPIRES\tREVOKED")
		for _, t := range list {
			ns := "*"
			if t.Namespaces != nil {
				ns = strings.Join(t.Namespaces, ",")
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.TokenID, orDash(t.Org), t.Role, t.Name, ns, orDash(t.ReadUserID),
				t.CreatedAt.UTC().Format(time.RFC3339), timeOrDash(t.ExpiresAt), timeOrDash(t.RevokedAt))
		}
		return w.Flush()
	})
}

// tokenID reads the token id revoke and rotate take before their flags.
func tokenID(fs *flag.FlagSet, args []string) (string, error) {
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return "", err
	}
	if id == "" {
		return "", usageError{fmt.Errorf("%s: want the token id first: `loomd %s TOKEN_ID`", fs.Name(), fs.Name())}
	}
	return id, nil
}

func runTokenRevoke(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("token revoke", flag.ContinueOnError)
	id, err := tokenID(fs, args)
	if err != nil {
		return err
	}
	return withTokens(ctx, func(tokens *auth.Store) error {
		t, err := tokens.Revoke(ctx, "", id)
		if err != nil {
			return err
		}
		fmt.Printf("token %s of org %s revoked at %s; every process refuses it within %s\n", t.TokenID, t.Org,
			t.RevokedAt.UTC().Format(time.RFC3339), tokens.CacheTTL())
		return nil
	})
}

func runTokenRotate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("token rotate", flag.ContinueOnError)
	expiresIn := fs.Duration("expires-in", 0, "end the new token after this long (default: the old token's expiry)")
	id, err := tokenID(fs, args)
	if err != nil {
		return err
	}
	expiresAt, err := expiryOf(*expiresIn)
	if err != nil {
		return err
	}
	return withTokens(ctx, func(tokens *auth.Store) error {
		secret, t, err := tokens.Rotate(ctx, "", id, expiresAt)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "token %s replaces %s (org %s, role %s)%s; %s is revoked. The new secret is shown once:\n",
			t.TokenID, id, t.Org, t.Role, expiryNote(t.ExpiresAt), id)
		fmt.Println(secret)
		return nil
	})
}

// withTokens opens Postgres, checks the deployment it records, and runs fn over the
// token store.
func withTokens(ctx context.Context, fn func(*auth.Store) error) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	if cfg.PG.DSN == "" {
		return errors.New("the token commands need LOOM_PG_DSN")
	}
	// A token bound to a user names it by reference, under the org's key, which the
	// session opens (and, for a new org, the store wraps) with the KEK.
	var ring *kek.Ring
	var sessionKeys string
	if cfg.Keys.KEK != "" {
		if ring, err = cfg.Keys.Ring(); err != nil {
			return err
		}
		sessionKeys = ring.SessionValue()
	}
	pool, err := pg.Open(ctx, pg.PoolConfig{DSN: cfg.PG.DSN, MaxConns: 2, KEK: sessionKeys})
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := checkPostgresRecord(ctx, pool, cfg.Boot.DeploymentID); err != nil {
		return err
	}
	err = fn(auth.NewStore(pool, auth.WithCacheTTL(cfg.HTTP.TokenCache), auth.WithLookupDeadline(cfg.PG.ReadDeadline),
		auth.WithUserRefs(userref.New(pool, ring)), auth.WithKEK(ring)))
	if errors.Is(err, auth.ErrTokenNotFound) {
		return errors.New("no such live token")
	}
	return err
}

func checkPostgresRecord(ctx context.Context, pool *pgxpool.Pool, configured string) error {
	_, err := boot.PostgresRecord(ctx, pool, configured)
	return err
}

func expiryOf(in time.Duration) (*time.Time, error) {
	switch {
	case in < 0:
		return nil, usageError{errors.New("--expires-in must be positive")}
	case in == 0:
		return nil, nil
	}
	at := time.Now().Add(in).UTC()
	return &at, nil
}

func expiryNote(at *time.Time) string {
	if at == nil {
		return ""
	}
	return ", expiring " + at.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// Command loomd is the one Loom binary: serve, dev, migrate, token, namespace snapshot and restore, export,
// projector reset and rebuild, republish, bench.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/boot"
	"github.com/loomplane/loom/internal/config"
)

const usage = `loomd — the Loom memory plane

Usage:
  loomd dev [--dir .loom] [--addr :8080] [--kafka-port 9092]
                        start embedded Postgres, ClickHouse and Kafka and serve every role
  loomd serve [--roles command,query,relay,projector] [--addr :8080]
                        serve with the stores named by LOOM_PG_DSN, LOOM_CH_ADDR, LOOM_KAFKA_BROKERS;
                        any subset of roles per process (api = command,query)
  loomd migrate         apply Postgres and ClickHouse migrations and create the topic
  loomd token create --org ORG [--role admin|writer|reader] [--name NAME] [--namespace NS]... [--read-user USER]
                    [--expires-in DURATION]
  loomd token create --operator [--name NAME] [--expires-in DURATION]
                        create an API token and print its secret (shown once); an
                        --operator token belongs to no org and only reaches the
                        deployment-wide controls (a projection's reset, health's details)
  loomd token list [--org ORG]
                        list tokens (never their secrets): reach, expiry, revocation
  loomd token revoke TOKEN_ID
                        revoke a token; every process refuses it within LOOM_AUTH_TOKEN_CACHE_MS
  loomd token rotate TOKEN_ID [--expires-in DURATION]
                        replace a token with a new secret of the same reach and revoke the old one
  loomd namespace snapshot --org ORG --namespace NS [--out FILE] [--gzip]
                        write the namespace's memories, read from Postgres at one generation, as a
                        snapshot (JSON Lines; --out - is stdout)
  loomd namespace restore --org ORG --namespace NS --in FILE
                        restore a snapshot (plain or gzip) into a namespace, created when missing;
                        idempotent per snapshot
  loomd export --org ORG --user-id USER [--out FILE] [--gzip]
                        write every memory of one user across the org, with every version
                        (subject-access export, JSON Lines)
  loomd projector reset --group G --to earliest|latest|<RFC3339> [--topic T] [--execute]
                        print (and with --execute apply) a consumer group offset reset;
                        refuses while the group has live members
  loomd projector rebuild [--projection P] [--drop-old | --abandon | --drop-retired | --status]
                        build a fresh generation of the projection tables beside the serving
                        ones from the topic, switch the query side to it once caught up, and
                        keep the old one until --drop-retired (resumes one under way)
  loomd republish --from-seq N [--namespace NS] [--org ORG] [--topic T]
                        re-create topic records from the Postgres journal (a lost or
                        truncated topic) and queue them for the relay
  loomd refs rotate --org ORG
                        replace the org's user reference key: every reference column rewritten
                        to a fresh key, the org's records republished under it, the old key
                        dropped (finishes a rotation an earlier run left half done)
  loomd audit verify [--org ORG [--namespace NS]]
                        walk each namespace's audit chain in ClickHouse against its checkpoints in
                        Postgres and name the first broken link (exit status 1)
  loomd bench [--scenario set,lag,get,history,search,...|all] [--duration 5s] [--concurrency C,...]
              [--out results.json] [--search-sizes 10000,...] [--dir DIR]
                        measure Loom against same-run baselines (embedded stores in a temporary
                        directory, or the configured ones); markdown on stdout, JSON to --out
  loomd knowledge ingest --namespace NS [--url http://localhost:8080] [--token-file F] [--prefix P]
                         [--tags a,b] [--no-wait] PATH...
                        submit the files under each PATH (a folder: each file by its path in it)
                        as knowledge.ingest jobs and follow them with a progress bar; exit 1
                        when a file failed
  loomd mcp [--url http://localhost:8080] [--token-file F]
                        serve MCP over stdin/stdout (what a desktop agent launches), calling the
                        Loom server at --url as the token in F (default: LOOM_TOKEN)
  loomd version

Configuration is read from LOOM_* environment variables only; see deploy/CONFIG.md.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "dev":
		err = runDev(ctx, os.Args[2:])
	case "serve":
		err = runServe(ctx, os.Args[2:])
	case "migrate":
		err = runMigrate(ctx, os.Args[2:])
	case "token":
		err = runToken(ctx, os.Args[2:])
	case "namespace":
		err = runNamespace(ctx, os.Args[2:])
	case "export":
		err = runExport(ctx, os.Args[2:])
	case "projector":
		err = runProjector(ctx, os.Args[2:])
	case "republish":
		err = runRepublish(ctx, os.Args[2:])
	case "refs":
		err = runRefs(ctx, os.Args[2:])
	case "audit":
		err = runAudit(ctx, os.Args[2:])
	case "bench":
		err = runBench(ctx, os.Args[2:])
	case "mcp":
		err = runMCP(ctx, os.Args[2:])
	case "knowledge":
		err = runKnowledge(ctx, os.Args[2:])
	case "version":
		fmt.Println("loomd", app.Version)
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "loomd: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if errors.Is(err, errHelpShown) {
		return
	}
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) || errors.Is(err, boot.ErrAuthority) {
			fmt.Fprintf(os.Stderr, "loomd: %v\n", err)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "loomd: %v\n", err)
		os.Exit(1)
	}
}

type usageError struct{ error }

func loadConfig() (config.Config, error) {
	return config.Load(os.Getenv)
}

func newLogger(level string, w io.Writer) *slog.Logger {
	var l slog.Level
	switch strings.ToLower(level) {
	case "debug":
		l = slog.LevelDebug
	case "warn":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

// errHelpShown ends a command whose --help was printed: loomd exits 0.
var errHelpShown = errors.New("help shown")

func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		printHelp(os.Stdout, fs)
		return errHelpShown
	} else if err != nil {
		return usageError{fmt.Errorf("%s: %w", fs.Name(), err)}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
	}
	return nil
}

// printHelp prints a command's --help: its lines of the usage text and its flags.
func printHelp(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage:\n%s", usageOf(fs.Name()))
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nFlags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	fmt.Fprintln(w, "\nConfiguration is read from LOOM_* environment variables only; see deploy/CONFIG.md.")
}

// isHelp reports whether a command group (token, projector) was asked for help.
func isHelp(args []string) bool {
	return len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help")
}

// usageOf is the part of the usage text about command (e.g. "token create"), or
// about every subcommand of a group (e.g. "projector"): each entry's line and the
// indented lines that follow it.
func usageOf(command string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(usage, "\n") {
		switch {
		case strings.HasPrefix(line, "  loomd "):
			rest := strings.TrimPrefix(line, "  loomd "+command)
			in = len(rest) < len(line)-len("  loomd ") && (rest == "" || rest[0] == ' ')
		case !strings.HasPrefix(line, "   "):
			in = false
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

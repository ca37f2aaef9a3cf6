package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/query"
)

// The memory commands run the operation in this process, on the stores the
// configuration names, as an admin of the org: they check the authority both stores
// record first (exit 2 on a mismatch) and migrate nothing.

// cliPrincipal is the principal a memory command acts as; its revisions and audit rows
// name it.
func cliPrincipal(org string) auth.Principal {
	return auth.Principal{TokenID: "loomd-cli", Org: org, Role: auth.RoleAdmin, Name: "loomd"}
}

// openRole opens a process of one role for a command, checking the recorded authority.
func openRole(ctx context.Context, role config.Role) (*app.Process, error) {
	cfg, err := loadConfig()
	if err != nil {
		return nil, err
	}
	cfg.Roles, cfg.Boot.Migrate = config.Roles{role}, false
	return app.Open(ctx, cfg, newLogger(cfg.LogLevel, os.Stderr))
}

func runNamespace(ctx context.Context, args []string) error {
	if len(args) == 0 || isHelp(args) {
		fmt.Printf("Usage:\n%s", usageOf("namespace"))
		if len(args) == 0 {
			return usageError{errors.New("namespace: want snapshot or restore")}
		}
		return errHelpShown
	}
	switch args[0] {
	case "snapshot":
		return runNamespaceSnapshot(ctx, args[1:])
	case "restore":
		return runNamespaceRestore(ctx, args[1:])
	}
	return usageError{fmt.Errorf("namespace: unknown command %q: want snapshot or restore", args[0])}
}

func runNamespaceSnapshot(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("namespace snapshot", flag.ContinueOnError)
	org := fs.String("org", "", "the org (required)")
	ns := fs.String("namespace", "", "the namespace to snapshot (required)")
	out := fs.String("out", "-", "the file to write (- for stdout)")
	gz := fs.Bool("gzip", false, "gzip the payload")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *org == "" || *ns == "" {
		return usageError{errors.New("namespace snapshot: --org and --namespace are required")}
	}
	return streamTo(ctx, *out, *gz, func(q *query.Service) (*query.Stream, error) { return q.Snapshot(ctx, cliPrincipal(*org), *ns) },
		"snapshot of "+*org+"/"+*ns)
}

func runExport(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	org := fs.String("org", "", "the org (required)")
	user := fs.String("user-id", "", "the user whose memories to export (required)")
	out := fs.String("out", "-", "the file to write (- for stdout)")
	gz := fs.Bool("gzip", false, "gzip the payload")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *org == "" || *user == "" {
		return usageError{errors.New("export: --org and --user-id are required")}
	}
	return streamTo(ctx, *out, *gz, func(q *query.Service) (*query.Stream, error) { return q.Export(ctx, cliPrincipal(*org), *user) },
		"export of user "+*user+" in "+*org)
}

// streamTo opens a bulk read and writes it to path.
func streamTo(ctx context.Context, path string, gz bool, open func(*query.Service) (*query.Stream, error), what string) error {
	n, err := openRole(ctx, config.RoleQuery)
	if err != nil {
		return err
	}
	defer n.Close()
	st, err := open(n.Query)
	if err != nil {
		return err
	}
	defer st.Close()
	var f *os.File = os.Stdout
	if path != "-" {
		if f, err = os.Create(path); err != nil {
			return err
		}
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	end, err := st.WriteOut(ctx, bw, gz)
	if err == nil {
		err = bw.Flush()
	}
	if path != "-" {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	fmt.Fprintf(os.Stderr, "%s (%s): %d memories, sha256 %s\n", what, st.ID(), end.Rows, end.SHA256)
	return nil
}

func runNamespaceRestore(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("namespace restore", flag.ContinueOnError)
	org := fs.String("org", "", "the org (required)")
	ns := fs.String("namespace", "", "the namespace to restore into (required; created when missing)")
	in := fs.String("in", "", "the snapshot file, plain or gzip (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *org == "" || *ns == "" || *in == "" {
		return usageError{errors.New("namespace restore: --org, --namespace and --in are required")}
	}
	n, err := openRole(ctx, config.RoleCommand)
	if err != nil {
		return err
	}
	defer n.Close()
	ans, err := n.Command.Restore(ctx, cliPrincipal(*org), *ns, func() (io.ReadCloser, error) { return openSnapshotFile(*in) })
	if err != nil {
		return err
	}
	out, _ := json.MarshalIndent(ans, "", "  ")
	fmt.Println(string(out))
	return nil
}

// openSnapshotFile opens a snapshot file, decompressing it when it is gzip.
func openSnapshotFile(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 1<<20)
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return readCloser{zr, f}, nil
	}
	return readCloser{br, f}, nil
}

type readCloser struct {
	io.Reader
	f *os.File
}

func (r readCloser) Close() error { return r.f.Close() }

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/loomplane/loom/adapters/mcp"
	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
)

// runMCP serves MCP over stdin and stdout for a desktop agent, calling the Loom server
// at --url as the token in --token-file (or LOOM_TOKEN). Nothing but MCP may be
// written to stdout: logs go to stderr.
func runMCP(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	url := fs.String("url", "http://localhost:8080", "the Loom server's base URL")
	tokenFile := fs.String("token-file", "", "a file holding the token (default: LOOM_TOKEN)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	token := os.Getenv("LOOM_TOKEN")
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fmt.Errorf("mcp: read the token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return usageError{errors.New("mcp: --token-file (or LOOM_TOKEN) is required")}
	}
	// Retryable answers (a projection a moment behind, a contended admission) are retried
	// here, within a tool call's patience, rather than handed to the model.
	c, err := client.New(*url, token, client.WithRetry(client.Retry{MaxElapsed: 20 * time.Second, IdempotentWrites: true}))
	if err != nil {
		return usageError{err}
	}
	return mcp.ServeStdio(ctx, c, mcp.Implementation{Name: "loomd", Version: app.Version}, os.Stdin, os.Stdout)
}

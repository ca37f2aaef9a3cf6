// Package mcp serves Loom's memory operations to agents over the Model Context
// Protocol, with the official Go SDK (github.com/modelcontextprotocol/go-sdk): the
// tools memory_set, memory_search, memory_ask, memory_get, memory_list, memory_history,
// memory_delete, memory_from_messages, memory_learnings, memory_log_turns, memory_recall, memory_crystallize, memory_profile,
// memory_context, memory_timeline, memory_promote, decision_record, profile_schema_set,
// memory_consolidate, memory_consolidate_undo, knowledge_search and knowledge_add, and
// the resource template loom://{namespace}/{key}.
//
// The tools call Loom through its REST API with package client, so a token, its
// scopes and every refusal are exactly REST's. Over stdio (ServeStdio, `loomd mcp`)
// the client is one token against a remote server; over streamable HTTP
// (NewHTTPHandler, mounted at /mcp) each request's bearer token is forwarded through
// the client the handler is given (loomd's reaches its own API in process, or an
// upstream URL in a split deployment).
package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomplane/loom/client"
)

// Implementation names the server in the MCP handshake.
type Implementation struct {
	Name, Version string
}

func (i Implementation) sdk() *sdk.Implementation {
	name := i.Name
	if name == "" {
		name = "loom"
	}
	return &sdk.Implementation{Name: name, Title: "Loom memory", Version: i.Version}
}

const instructions = `Loom is your long-term memory. Write what is worth remembering with memory_set ` +
	`(a namespace, a short stable key, and the value); look things up with memory_search before answering ` +
	`from memory. When memory_search answers any verdict but "ok" (no_match, below_threshold, ` +
	`low_calibrated_confidence, ungrounded_identifier), nothing stored is relevant: say you do not know ` +
	`rather than use its hits. memory_ask answers a question from the memories with citations, or abstains. ` +
	`memory_get reads one key, memory_list a ` +
	`namespace, memory_history every version of a key, memory_delete forgets a key. ` +
	`memory_from_messages hands Loom a conversation to extract and write its durable facts; ` +
	`memory_learnings lists the rules about you it filed for review instead. ` +
	`memory_profile reads what Loom knows about a user as one profile; ` +
	`memory_context answers, in one call, a cited block for your prompt cut to a token budget; ` +
	`memory_timeline how a key's or a subject's facts changed over time; ` +
	`memory_log_turns keeps the conversation's turns as they happen; memory_recall reads back what was said; ` +
	`memory_crystallize turns a session's logged turns into facts; ` +
	`memory_promote shares one of your memories with every user of the namespace; decision_record records ` +
	`a decision, why and by whom. With an admin token, profile_schema_set sets the shape of users' profiles, ` +
	`memory_consolidate merges near-identical memories into summaries and memory_consolidate_undo undoes a run.`

// NewServer returns an MCP server whose tools call Loom through c. cache may be nil; a
// process that builds a server per request shares one.
func NewServer(c *client.Client, impl Implementation, cache *sdk.SchemaCache) *sdk.Server {
	s := sdk.NewServer(impl.sdk(), &sdk.ServerOptions{Instructions: instructions, SchemaCache: cache})
	addTools(s, c)
	addResources(s, c)
	return s
}

// ServeStdio serves MCP on in and out (a desktop agent's stdin and stdout) until ctx
// ends or the peer closes the stream. Each message is checked as over HTTP before the
// SDK reads it (checkedMessages).
func ServeStdio(ctx context.Context, c *client.Client, impl Implementation, in io.ReadCloser, out io.WriteCloser) error {
	w := &lockedWriter{w: out}
	msgs := checkedMessages(in, w)
	defer msgs.Close()
	err := NewServer(c, impl, nil).Run(ctx, &sdk.IOTransport{Reader: msgs, Writer: w})
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// HTTPOptions configure the streamable HTTP transport.
type HTTPOptions struct {
	Implementation
	// Loom is the client the tools call Loom with; each request's calls act as the
	// request's bearer token (Loom.WithToken), whatever token Loom holds.
	Loom *client.Client
}

type serverKey struct{}

// httpRetry retries what Loom says is retryable (a projection a moment behind, a
// contended admission) within a tool call's patience, instead of handing it to the model.
var httpRetry = client.Retry{MaxElapsed: 10 * time.Second}

// NewHTTPHandler serves MCP's streamable HTTP transport, stateless and with JSON
// answers (no server-to-client stream: the tools need none, and a proxy that buffers
// answers does not break them). Each request's server calls Loom as the request's
// bearer token; a request without one is answered 401 before any MCP is read. A body
// JSON-RPC or the REST API would refuse is answered a JSON-RPC error (-32700, -32600)
// before the SDK reads it (checkFraming).
func NewHTTPHandler(o HTTPOptions) http.Handler {
	cache := sdk.NewSchemaCache()
	h := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		s, _ := r.Context().Value(serverKey{}).(*sdk.Server)
		return s
	}, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	loom := o.Loom.With(client.WithRetry(httpRetry))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || strings.TrimSpace(token) == "" {
			writeUnauthenticated(w)
			return
		}
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
				return
			}
			if refusal := checkFraming(body); refusal != nil {
				writeRefusal(w, refusal)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		s := NewServer(loom.WithToken(strings.TrimSpace(token)), o.Implementation, cache)
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), serverKey{}, s)))
	})
}

func writeUnauthenticated(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("WWW-Authenticate", "Bearer")
	w.WriteHeader(http.StatusUnauthorized)
	fmt.Fprint(w, `{"error":{"code":"UNAUTHENTICATED","message":"missing bearer token: send Authorization: Bearer <token>","retryable":false}}`)
}

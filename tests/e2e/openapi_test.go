package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/bench"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

const specPath = "../../schemas/openapi.yaml"

// loadSpec parses schemas/openapi.yaml with kin-openapi and points its server at url.
func loadSpec(t *testing.T, url string) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(specPath)
	if err != nil {
		t.Fatalf("load %s: %v", specPath, err)
	}
	doc.Servers = openapi3.Servers{{URL: url}}
	return doc
}

// specMethods are the operations of a path item, by HTTP method.
func specMethods(item *openapi3.PathItem) []string {
	var out []string
	for m := range item.Operations() {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

var fiberParamRE = regexp.MustCompile(`:([A-Za-z_][A-Za-z0-9_]*)`)

// specSpelling is a Fiber route's path as the spec spells it: parameters in braces
// (Fiber's `id` is the spec's `memory_id`), an escaped colon a literal one.
func specSpelling(path string) string {
	const colon = "\x00"
	path = strings.ReplaceAll(path, `\:`, colon)
	path = fiberParamRE.ReplaceAllStringFunc(path, func(p string) string {
		name := p[1:]
		if name == "id" {
			name = "memory_id"
		}
		return "{" + name + "}"
	})
	return strings.ReplaceAll(path, colon, ":")
}

// Fiber's route table, as the running process registered it, against the spec's
// paths: every route a request can reach is documented, and every documented
// operation reaches a route. A key's custom methods (`{key}:pin`, …) share one
// registered POST route, which dispatches on the suffix.
func TestTheSpecDocumentsFibersRouteTable(t *testing.T) {
	n, url := env.SharedAPI(t)
	doc := loadSpec(t, url)
	registered := map[string]bool{}
	for _, r := range n.HTTP.GetRoutes(true) {
		if r.Method == http.MethodHead || r.Method == http.MethodOptions || r.Method == http.MethodConnect || r.Method == http.MethodTrace {
			continue // Fiber's automatic HEAD of a GET; the others are no route of ours
		}
		registered[r.Method+" "+specSpelling(r.Path)] = true
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for _, m := range specMethods(item) {
			documented[m+" "+path] = true
		}
	}
	if len(registered) < 40 {
		t.Fatalf("Fiber's route table holds %d routes: %v", len(registered), registered)
	}
	// The custom-method routes: one route each, documented once per method.
	methodRoutes := []string{"POST /v1/namespaces/{ns}/memories/{key}", "POST /v1/memories/{memory_id}"}
	for route := range registered {
		if documented[route] {
			continue
		}
		if slices.Contains(methodRoutes, route) && slices.ContainsFunc(slices.Collect(maps.Keys(documented)), func(d string) bool {
			return strings.HasPrefix(d, route+":")
		}) {
			continue
		}
		t.Errorf("the server registers %s, which %s does not document", route, specPath)
	}
	for route := range documented {
		if registered[route] || slices.ContainsFunc(methodRoutes, func(m string) bool { return strings.HasPrefix(route, m+":") && registered[m] }) {
			continue
		}
		t.Errorf("%s documents %s, which the server does not register", specPath, route)
	}
}

// specCheck is an http.RoundTripper that checks each request a client sends and each
// answer the server gives against the spec with kin-openapi's openapi3filter: the
// route and method must be documented, the request must match its parameters and body
// schema, and the answer its status and content schema (error envelopes included).
type specCheck struct {
	t      *testing.T
	router routers.Router
	mu     sync.Mutex
	seen   map[string]bool // operationIds called
}

func newSpecCheck(t *testing.T, url string) *specCheck {
	t.Helper()
	doc := loadSpec(t, url)
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("route the spec: %v", err)
	}
	registerEventStream(doc)
	return &specCheck{t: t, router: router, seen: map[string]bool{}}
}

func (s *specCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
	}
	rewind := func() { req.Body = io.NopCloser(bytes.NewReader(body)) }
	what := req.Method + " " + req.URL.Path
	route, params, err := s.router.FindRoute(req)
	if err != nil {
		s.t.Errorf("%s: the spec documents no such operation: %v", what, err)
		rewind()
		return http.DefaultTransport.RoundTrip(req)
	}
	s.mu.Lock()
	s.seen[route.Operation.OperationID] = true
	s.mu.Unlock()
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	rewind()
	if err := openapi3filter.ValidateRequest(req.Context(), in); err != nil {
		s.t.Errorf("%s (%s): the request does not match the spec: %v", what, route.Operation.OperationID, err)
	}
	rewind()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(answer)), Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		s.t.Errorf("%s (%s): the %d answer does not match the spec: %v\nanswer: %.2000s", what, route.Operation.OperationID, resp.StatusCode, err, answer)
	}
	return resp, nil
}

// eventSchemas are the schemas of memory.ask's server-sent events' data, by event.
var eventSchemas = map[string]string{"search": "SearchAnswer", "answer": "AskAnswer", "error": "ErrorEnvelope"}

// registerEventStream decodes text/event-stream answers: each event's data must match
// the schema the spec names for it (eventSchemas; `done` carries none).
func registerEventStream(doc *openapi3.T) {
	openapi3filter.RegisterBodyDecoder("text/event-stream", func(r io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		raw, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		event := ""
		for _, line := range strings.Split(string(raw), "\n") {
			switch {
			case strings.HasPrefix(line, "event:"):
				event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			case strings.HasPrefix(line, "data:") && eventSchemas[event] != "":
				var v any
				if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, "data:"))), &v); err != nil {
					return nil, fmt.Errorf("event %s: %w", event, err)
				}
				if err := doc.Components.Schemas[eventSchemas[event]].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
					return nil, fmt.Errorf("event %s: %w", event, err)
				}
			}
		}
		return string(raw), nil
	})
}

func init() {
	// JSON Lines: each line must match the schema (which is one line's).
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", func(r io.Reader, _ http.Header, schema *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		var last any
		for i := 1; sc.Scan(); i++ {
			var v any
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				return nil, fmt.Errorf("line %d: %w", i, err)
			}
			if err := schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
				return nil, fmt.Errorf("line %d: %w", i, err)
			}
			last = v
		}
		return last, sc.Err()
	})
}

// Every operation of the typed client against a real server, through specCheck: each
// route it calls is documented, each request matches the spec, each answer (errors
// included) matches the spec's schema for its status. The calls need not succeed; a
// method added to the client without a call here fails the test.
func TestTheTypedClientAndTheServerKeepToTheSpec(t *testing.T) {
	// The scripted model provider answers memory.ask and memory.set_from_messages.
	provider := bench.StartScriptedProvider()
	t.Cleanup(func() { provider.Close() })
	n, url := env.API(t, func(c *config.Config) { c.LLM.BaseURL, c.LLM.Model = provider.URL, bench.ScriptedModel })
	org := testenv.Unique(t, "org")
	check := newSpecCheck(t, url)
	c, err := client.New(url, env.Token(t, n, auth.NewToken{Org: org}), client.WithHTTPClient(&http.Client{Transport: check}))
	if err != nil {
		t.Fatal(err)
	}
	// The deployment's controls, and health's operator-only fields, answer an operator.
	operator := c.WithToken(env.Token(t, n, auth.NewToken{Role: auth.RoleOperator}))
	ctx := context.Background()
	ns, restored := testenv.Unique(t, "spec"), testenv.Unique(t, "spec-restored")
	alice := client.Identity{UserID: "alice"}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	var set *client.SetAnswer
	var found *client.SearchAnswer
	var snapshot []byte
	drain := func(s *client.Stream, err error) ([]byte, error) {
		if err != nil {
			return nil, err
		}
		defer s.Close()
		return io.ReadAll(s)
	}
	var ingestionID string // the Ingest call's job, which IngestStatus and CancelIngest read
	calls := []struct {
		method string
		call   func() error
	}{
		{"Configure", func() error {
			_, err := c.Configure(ctx, ns, client.NamespaceConfig{ConflictPolicy: "append_only"})
			return err
		}},
		{"Namespace", func() error { _, err := c.Namespace(ctx, ns); return err }},
		{"ListNamespaces", func() error { _, err := c.ListNamespaces(ctx, client.NamespacesOptions{Limit: 5}); return err }},
		{"AddBlacklistPattern", func() error { _, err := c.AddBlacklistPattern(ctx, ns, `(?i)falcon`); return err }},
		{"Blacklist", func() error { _, err := c.Blacklist(ctx, ns); return err }},
		{"SweepBlacklist", func() error { _, err := c.SweepBlacklist(ctx, ns, `(?i)falcon`); return err }},
		{"RemoveBlacklistPattern", func() error { _, err := c.RemoveBlacklistPattern(ctx, ns, `(?i)falcon`); return err }},
		{"Set", func() (err error) {
			set, err = c.Set(ctx, ns, "tea", client.SetRequest{Value: "alice drinks green tea", Identity: alice, Tags: []string{"drink"}})
			must("set", err)
			return err
		}},
		{"Get", func() error { _, err := c.Get(ctx, ns, "tea", alice, time.Time{}); return err }},
		{"GetByID", func() error { _, err := c.GetByID(ctx, set.MemoryID); return err }},
		{"Update", func() error {
			_, err := c.Update(ctx, ns, "tea", client.UpdateRequest{Value: "alice drinks black tea", Identity: alice})
			return err
		}},
		{"UpdateByID", func() error {
			_, err := c.UpdateByID(ctx, set.MemoryID, client.UpdateRequest{Tags: []string{"drink", "morning"}})
			return err
		}},
		{"Pin", func() error { _, err := c.Pin(ctx, ns, "tea", alice); return err }},
		{"Unpin", func() error { _, err := c.Unpin(ctx, ns, "tea", alice); return err }},
		{"Lock", func() error { _, err := c.Lock(ctx, ns, "tea", alice); return err }},
		{"Unlock", func() error { _, err := c.Unlock(ctx, ns, "tea", alice); return err }},
		{"Verify", func() error { _, err := c.Verify(ctx, ns, "tea", alice); return err }},
		{"Touch", func() error { _, err := c.Touch(ctx, ns, "tea", alice); return err }},
		{"ModelCalls", func() error { _, err := c.ModelCalls(ctx); return err }},
		{"SetModelCalls", func() error {
			if _, err := c.SetModelCalls(ctx, true); err != nil {
				return err
			}
			_, err := c.SetModelCalls(ctx, false)
			return err
		}},
		{"VerifyByID", func() error { _, err := c.VerifyByID(ctx, set.MemoryID); return err }},
		{"AllowPair", func() error {
			other, err := c.Set(ctx, ns, "coffee", client.SetRequest{Value: "alice drinks black coffee", Identity: alice})
			if err != nil {
				return err
			}
			_, err = c.AllowPair(ctx, ns, set.MemoryID, other.MemoryID)
			return err
		}},
		{"ConflictAllowlist", func() error { _, err := c.ConflictAllowlist(ctx, ns); return err }},
		{"DisallowPair", func() error {
			_, err := c.DisallowPair(ctx, ns, set.MemoryID, "00000000-0000-0000-0000-000000000001")
			return err
		}},
		{"Unsupersede", func() error { _, err := c.Unsupersede(ctx, ns, "tea", alice); return err }},
		{"AcceptProposal", func() error { _, err := c.AcceptProposal(ctx, ns, "no-proposal", alice); return err }},
		{"RejectProposal", func() error { _, err := c.RejectProposal(ctx, ns, "no-proposal", alice); return err }},
		{"BulkSet", func() error {
			_, err := c.BulkSet(ctx, ns, client.BulkSetRequest{Entries: []client.BulkEntry{{Key: "a", Value: 1}, {Key: "b", Value: map[string]any{"x": true}}}})
			return err
		}},
		{"BulkGet", func() error {
			_, err := c.BulkGet(ctx, ns, client.BulkGetRequest{Keys: []client.BulkGetKey{{MemoryKey: "a"}, {MemoryKey: "zz"}}, IDs: []string{set.MemoryID}})
			return err
		}},
		{"Delete", func() error { _, err := c.Delete(ctx, ns, "a", client.Identity{}, ""); return err }},
		{"Restore", func() error { _, err := c.Restore(ctx, ns, "a", client.Identity{}); return err }},
		{"Reject", func() error { _, err := c.Reject(ctx, ns, "b", client.Identity{}); return err }},
		{"Redact", func() error {
			_, err := c.Redact(ctx, ns, "tea", client.RedactRequest{Version: set.VersionText, Identity: alice})
			return err
		}},
		{"RedactByID", func() error { _, err := c.RedactByID(ctx, set.MemoryID, set.VersionText); return err }},
		{"History", func() error { _, err := c.History(ctx, ns, "tea", alice); return err }},
		// Shared scope, copy and move, decisions and the namespace tools.
		{"Promote", func() error { _, err := c.Promote(ctx, ns, "tea", alice); return err }},
		{"CrossPromote", func() error { _, err := c.CrossPromote(ctx, ns, "tea", alice, ns+"-other"); return err }},
		{"Demote", func() error { _, err := c.Demote(ctx, ns, "tea"); return err }},
		{"CopyMemory", func() error {
			_, err := c.CopyMemory(ctx, ns, "tea", client.MoveRequest{Identity: alice, TargetKey: "tea-copy"})
			return err
		}},
		{"MoveMemory", func() error {
			_, err := c.MoveMemory(ctx, ns, "tea-copy", client.MoveRequest{Identity: alice, TargetKey: "tea-moved"})
			return err
		}},
		{"RecordDecision", func() error {
			_, err := c.RecordDecision(ctx, ns, client.DecisionRequest{Key: "tea-policy", Decision: "serve tea at nine", Rationale: "people asked",
				DecidedBy: "the office", Supersedes: []string{"tea-policy-old"}, UserID: "alice"})
			return err
		}},
		{"Inspect", func() error { _, err := c.Inspect(ctx, ns, "tea", alice); return err }},
		{"Inventory", func() error { _, err := c.Inventory(ctx, ns); return err }},
		{"AssignCategory", func() error {
			_, err := c.AssignCategory(ctx, ns, "tea", client.AssignCategoryRequest{Identity: alice, Categories: []string{"drinks"}})
			return err
		}},
		{"Categories", func() error { _, err := c.Categories(ctx, ns); return err }},
		{"ValidateNamespace", func() error { _, err := c.ValidateNamespace(ctx, ns); return err }},
		{"TuneNamespace", func() error { _, err := c.TuneNamespace(ctx, ns); return err }},
		{"DeleteNamespace", func() error { _, err := c.DeleteNamespace(ctx, ns+"-other"); return err }},
		{"Search", func() (err error) {
			found, err = c.Search(ctx, ns, client.SearchRequest{Query: "which tea does alice drink", UserID: "alice", Trace: true})
			must("search", err)
			return err
		}},
		{"SearchTrace", func() error { _, err := c.SearchTrace(ctx, found.TraceID); return err }},
		{"Ask", func() error {
			_, err := c.Ask(ctx, ns, client.AskRequest{Query: "which tea does alice drink?"})
			return err
		}},
		{"AskStream", func() error {
			_, err := c.AskStream(ctx, ns, client.AskRequest{Query: "which tea does alice drink?"}, nil)
			return err
		}},
		{"List", func() error { _, err := c.List(ctx, ns, client.ListOptions{Order: "key"}); return err }},
		{"Keys", func() error { _, err := c.Keys(ctx, ns, client.KeysOptions{}); return err }},
		{"Entity", func() error { _, err := c.Entity(ctx, ns, "tea", client.EntityOptions{}); return err }},
		{"NamespaceAudit", func() error { _, err := c.NamespaceAudit(ctx, ns, client.AuditOptions{Limit: 5}); return err }},
		{"FromMessages", func() error {
			_, err := c.FromMessages(ctx, ns, client.FromMessagesRequest{Messages: []client.Message{{Role: "user", Content: "I moved to Lisbon."}}, Identity: alice})
			return err
		}},
		{"Import", func() error {
			_, err := c.Import(ctx, ns, client.ImportRequest{Items: []client.ImportItem{{Text: "alice likes jazz"}}, Identity: alice})
			return err
		}},
		{"Observe", func() error {
			_, err := c.Observe(ctx, ns, client.ObserveRequest{Turns: []client.ObservedTurn{{Role: "user", Content: "I drink green tea.", Speaker: "Alice"}}, Identity: alice})
			return err
		}},
		{"Recall", func() error {
			_, err := c.Recall(ctx, ns, client.RecallRequest{Query: "which tea?", Identity: alice})
			return err
		}},
		{"Crystallize", func() error {
			_, err := c.Crystallize(ctx, ns, client.CrystallizeRequest{Identity: alice}) // no provider: a refusal, checked as any answer
			return err
		}},
		{"Pack", func() error {
			_, err := c.Pack(ctx, ns, client.PackRequest{Query: "which tea?", UserID: "alice", SessionID: alice.SessionID})
			return err
		}},
		{"Stack", func() error {
			_, err := c.Stack(ctx, ns, client.PackRequest{Query: "which tea?", UserID: "alice"})
			return err
		}},
		{"Timeline", func() error {
			_, err := c.Timeline(ctx, ns, client.TimelineQuery{Identity: alice, Key: "tea"})
			return err
		}},
		{"Related", func() error { _, err := c.Related(ctx, ns, "tea", alice, 5); return err }},
		{"Aggregate", func() error {
			_, err := c.Aggregate(ctx, ns, client.AggregateQuery{By: []string{"type", "tag"}})
			return err
		}},
		{"Statuses", func() error {
			_, err := c.Statuses(ctx, ns, []client.BulkGetKey{{MemoryKey: "tea", Identity: alice}, {MemoryKey: "none", Identity: alice}})
			return err
		}},
		{"ExtractionStatus", func() error { _, err := c.ExtractionStatus(ctx, ns, client.ExtractionOptions{}); return err }},
		{"Learnings", func() error { _, err := c.Learnings(ctx, ns, client.LearningsOptions{}); return err }},
		{"MyExtractions", func() error { _, err := c.MyExtractions(ctx, client.ExtractionOptions{}); return err }},
		{"MyExtraction", func() error { _, err := c.MyExtraction(ctx, "00000000-0000-0000-0000-000000000000"); return err }},
		{"RetryMyExtractions", func() error {
			_, err := c.RetryMyExtractions(ctx, []string{"00000000-0000-0000-0000-000000000000"})
			return err
		}},
		{"SnapshotNamespace", func() (err error) { snapshot, err = drain(c.SnapshotNamespace(ctx, ns)); return err }},
		{"RestoreNamespace", func() error { _, err := c.RestoreNamespace(ctx, restored, snapshot); return err }},
		{"RollbackNamespace", func() error {
			_, err := c.RollbackNamespace(ctx, ns, client.RollbackRequest{AsOf: time.Now().Add(-time.Hour)})
			return err
		}},
		{"SetProfileSchema", func() error {
			_, err := c.SetProfileSchema(ctx, ns, map[string]any{"type": "object", "additionalProperties": false,
				"required": []string{"drink"}, "properties": map[string]any{"drink": map[string]any{"type": []string{"string", "null"}}}})
			return err
		}},
		{"Profile", func() error { _, err := c.Profile(ctx, ns, "alice"); return err }},
		{"RenderProfile", func() error { _, err := c.RenderProfile(ctx, ns, "alice", "text"); return err }},
		{"Consolidate", func() error {
			_, err := c.Consolidate(ctx, ns, client.ConsolidateRequest{UserID: "alice", DryRun: true})
			return err
		}},
		{"UndoConsolidation", func() error {
			_, err := c.UndoConsolidation(ctx, ns, "00000000-0000-4000-8000-000000000001")
			return err
		}},
		{"Export", func() error { _, err := drain(c.Export(ctx, "alice")); return err }},
		{"Clear", func() error { _, err := c.Clear(ctx, ns, client.ClearRequest{UserID: "-"}); return err }},
		{"SweepExpired", func() error { _, err := c.SweepExpired(ctx, ns); return err }},
		{"CreateToken", func() error {
			_, err := c.CreateToken(ctx, client.TokenRequest{Role: "reader", Name: "spec"})
			return err
		}},
		{"Tokens", func() error { _, err := c.Tokens(ctx); return err }},
		{"TokenSelf", func() error { _, err := c.TokenSelf(ctx); return err }},
		{"RevokeToken", func() error { _, err := c.RevokeToken(ctx, "00000000-0000-0000-0000-000000000000"); return err }},
		{"RequestErasure", func() error {
			_, err := c.RequestErasure(ctx, client.ErasureRequest{UserID: "bob", Namespace: ns})
			return err
		}},
		{"Erasure", func() error { _, err := c.Erasure(ctx, "00000000-0000-0000-0000-000000000000"); return err }},
		{"Health", func() error {
			if _, err := operator.Health(ctx, "postgres", "lag", "index", "workers", "namespaces", "erasures", "extractions", "topic"); err != nil {
				return err
			}
			_, err := c.Health(ctx, "postgres", "lag", "index")
			return err
		}},
		{"AddDocument", func() error {
			_, err := c.AddDocument(ctx, ns, client.DocumentInput{SourceURI: "spec/a.txt", Content: client.Text("the quokka handbook"), Tags: []string{"t"}})
			return err
		}},
		{"UpsertDocument", func() error {
			_, err := c.UpsertDocument(ctx, ns, client.DocumentInput{SourceURI: "spec/a.txt", Content: client.Text("the quokka handbook, revised")})
			return err
		}},
		{"BulkAddDocuments", func() error {
			_, err := c.BulkAddDocuments(ctx, ns, []client.DocumentInput{{SourceURI: "spec/b.txt", Content: client.Text("b")},
				{SourceURI: "spec/c.bin", ContentBase64: "AAEC", ContentType: "application/x-unknown"}}) // 415
			return err
		}},
		{"GetDocument", func() error { _, err := c.GetDocument(ctx, ns, "spec/a.txt"); return err }},
		{"ListDocuments", func() error {
			_, err := c.ListDocuments(ctx, ns, client.DocumentListOptions{Prefix: "spec/", Limit: 5, UserID: "bob"})
			return err
		}},
		{"SearchKnowledge", func() error {
			after := time.Now().Add(-time.Hour)
			_, err := c.SearchKnowledge(ctx, ns, client.KnowledgeSearchRequest{Query: "quokka", Tags: []string{"t"}, UpdatedAfter: &after})
			return err
		}},
		{"OutlineDocument", func() error { _, err := c.OutlineDocument(ctx, ns, "spec/a.txt"); return err }},
		{"InspectKnowledge", func() error { _, err := c.InspectKnowledge(ctx, ns); return err }},
		{"GetDatasets", func() error { _, err := c.GetDatasets(ctx, ns, "spec/a.txt"); return err }},
		{"ApproveDataset", func() error { _, err := c.ApproveDataset(ctx, ns, "spec/a.txt", "table-1", 1); return err }},
		{"QueryDataset", func() error {
			_, err := c.QueryDataset(ctx, ns, "spec/a.txt", "table-1", client.DatasetQuery(`{"limit":1}`))
			return err
		}},
		{"DeleteDocument", func() error { _, err := c.DeleteDocument(ctx, ns, "spec/a.txt", nil); return err }},
		{"RestoreDocument", func() error { _, err := c.RestoreDocument(ctx, ns, "spec/a.txt", nil); return err }},
		{"Ingest", func() error {
			text := "a spec ingestion of quokkas"
			job, err := c.Ingest(ctx, ns, []client.DocumentInput{{SourceURI: "spec/ingested.txt", Content: &text}})
			if err != nil {
				return err
			}
			ingestionID = job.IngestionID
			return nil
		}},
		{"IngestFor", func() error {
			text := "bob's spec ingestion of quokkas"
			_, err := c.IngestFor(ctx, ns, "bob", []client.DocumentInput{{SourceURI: "spec/bob-ingested.txt", Content: &text}})
			return err
		}},
		{"IngestStatus", func() error { _, err := c.IngestStatus(ctx, ns, ingestionID); return err }},
		{"CancelIngest", func() error { _, err := c.CancelIngest(ctx, ns, ingestionID); return err }},
		{"Synthesize", func() error {
			_, err := c.Synthesize(ctx, ns, client.KnowledgeSearchRequest{Query: "quokka"}) // no provider: a refusal
			return err
		}},
		{"Ready", func() error { _, err := c.Ready(ctx); return err }},
		{"Metrics", func() error { _, err := c.Metrics(ctx); return err }},
		{"ResetProjection", func() error {
			if _, err := c.ResetProjection(ctx, n.Cfg.Pipeline.Projection, client.ResetRequest{To: "earliest"}); err == nil {
				return fmt.Errorf("an org token reset the projection")
			}
			_, err := operator.ResetProjection(ctx, n.Cfg.Pipeline.Projection, client.ResetRequest{To: "earliest"}) // a dry run
			return err
		}},
	}
	called := map[string]bool{}
	for _, k := range calls {
		called[k.method] = true
		if err := k.call(); err != nil {
			t.Logf("%s: %v", k.method, err) // an error answer is checked against the spec as any other
		}
	}
	// Every method of the client that calls the server is in the table.
	notCalls := []string{"BaseURL", "WithToken", "With", "Raw"} // a client over the same server, no call
	ty := reflect.TypeOf(c)
	for i := range ty.NumMethod() {
		if m := ty.Method(i).Name; !called[m] && !slices.Contains(notCalls, m) {
			t.Errorf("client.%s is not exercised against the spec: add it to the table", m)
		}
	}
	t.Logf("%d operations of the spec called", len(check.seen))
}

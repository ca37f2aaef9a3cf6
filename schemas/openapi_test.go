package schemas_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// These tests read the spec as text (openapi_valid_test.go parses it): the layout
// it relies on is two-space indentation, path keys at column 2 under a top-level
// `paths:`, and operations at column 4 under their path.

const specFile = "openapi.yaml"

// documentedRoutes is every (path, method) the server registers, as the spec must
// spell it. TestRoutesInCodeMatchTheList keeps this list honest against the code.
var documentedRoutes = map[string][]string{
	// The conversation's record and what an agent reads before it answers (issue 30).
	"/v1/namespaces/{ns}/turns":                        {"post"},
	"/v1/namespaces/{ns}/turns:crystallize":            {"post"},
	"/v1/namespaces/{ns}/memories:recall":              {"post"},
	"/v1/namespaces/{ns}/context:pack":                 {"post"},
	"/v1/namespaces/{ns}/context:stack":                {"post"},
	"/v1/namespaces/{ns}/timeline":                     {"get"},
	"/v1/namespaces/{ns}/memories/{key}/related":       {"get"},
	"/v1/namespaces/{ns}/memories:aggregate":           {"get"},
	"/v1/namespaces/{ns}/memories:statuses":            {"post"},
	"/v1/namespaces/{ns}/sessions/{session_id}/digest": {"get"},
	"/v1/namespaces/{ns}/learnings":                    {"get"},
	// Profiles and consolidation (issue 32).
	"/v1/namespaces/{ns}/profile-schema":               {"put"},
	"/v1/namespaces/{ns}/profiles/{user_id}":           {"get"},
	"/v1/namespaces/{ns}/profiles/{user_id}/render":    {"get"},
	"/v1/namespaces/{ns}/memories:consolidate":         {"post"},
	"/v1/namespaces/{ns}/consolidations/{run_id}:undo": {"post"},
	// Shared memory and namespace tools (issue 33).
	"/v1/namespaces/{ns}/memories/{key}:promote":       {"post"},
	"/v1/namespaces/{ns}/memories/{key}:cross_promote": {"post"},
	"/v1/namespaces/{ns}/memories/{key}:demote":        {"post"},
	"/v1/namespaces/{ns}/memories/{key}:copy":          {"post"},
	"/v1/namespaces/{ns}/memories/{key}:move":          {"post"},
	"/v1/namespaces/{ns}/decisions":                    {"post"},
	"/v1/namespaces/{ns}/inventory":                    {"get"},
	"/v1/namespaces/{ns}/memories/{key}/inspect":       {"get"},
	"/v1/namespaces/{ns}/knowledge":                    {"get", "post", "put"},
	"/v1/namespaces/{ns}/knowledge:bulkAdd":            {"post"},
	"/v1/namespaces/{ns}/knowledge:search":             {"post"},
	"/v1/namespaces/{ns}/knowledge/document":           {"get", "delete"},
	"/v1/namespaces/{ns}/knowledge/document:restore":   {"post"},
	"/v1/namespaces/{ns}/knowledge/outline":            {"get"},
	"/v1/namespaces/{ns}/knowledge/inspect":            {"get"},
	"/v1/namespaces/{ns}/knowledge/datasets":           {"get"},
	"/v1/namespaces/{ns}/knowledge/datasets:approve":   {"post"},
	"/v1/namespaces/{ns}/knowledge/datasets:query":     {"post"},
	// knowledge.ingest, ingest_status and ingest_cancel.
	"/v1/namespaces/{ns}/knowledge/ingestions":                       {"post"},
	"/v1/namespaces/{ns}/knowledge:synthesize":                       {"post"},
	"/v1/namespaces/{ns}/knowledge/ingestions/{ingestion_id}":        {"get"},
	"/v1/namespaces/{ns}/knowledge/ingestions/{ingestion_id}:cancel": {"post"},
	"/v1/namespaces":                                 {"get"},
	"/v1/namespaces/{ns}/memories":                   {"get"},
	"/v1/namespaces/{ns}/keys":                       {"get"},
	"/v1/namespaces/{ns}/memories/{key}":             {"get", "put", "patch", "delete"},
	"/v1/namespaces/{ns}/memories/{key}:pin":         {"post"},
	"/v1/namespaces/{ns}/memories/{key}:unpin":       {"post"},
	"/v1/namespaces/{ns}/memories/{key}:lock":        {"post"},
	"/v1/namespaces/{ns}/memories/{key}:unlock":      {"post"},
	"/v1/namespaces/{ns}/memories/{key}:reject":      {"post"},
	"/v1/namespaces/{ns}/memories/{key}:verify":      {"post"},
	"/v1/namespaces/{ns}/memories/{key}:restore":     {"post"},
	"/v1/namespaces/{ns}/memories/{key}:redact":      {"post"},
	"/v1/namespaces/{ns}/memories/{key}/history":     {"get"},
	"/v1/namespaces/{ns}/graph/entities/{name}":      {"get"},
	"/v1/namespaces/{ns}/audit":                      {"get"},
	"/v1/memories/{memory_id}:verify":                {"post"},
	"/v1/memories/{memory_id}:redact":                {"post"},
	"/v1/memories/{memory_id}":                       {"get", "patch"},
	"/v1/namespaces/{ns}/memories:search":            {"post"},
	"/v1/search-traces/{trace_id}":                   {"get"},
	"/v1/namespaces/{ns}/memories:clear":             {"post"},
	"/v1/namespaces/{ns}/memories:bulkSet":           {"post"},
	"/v1/namespaces/{ns}/memories:sweepExpired":      {"post"},
	"/v1/namespaces/{ns}/memories:fromMessages":      {"post"},
	"/v1/namespaces/{ns}/memories:import":            {"post"},
	"/v1/namespaces/{ns}/extractions":                {"get"},
	"/v1/extractions":                                {"get"},
	"/v1/extractions/{queue_id}":                     {"get"},
	"/v1/extractions:retry":                          {"post"},
	"/v1/orgs/self/model-calls":                      {"get", "put"},
	"/v1/namespaces/{ns}/memories/{key}:touch":       {"post"},
	"/v1/namespaces/{ns}":                            {"get", "put", "delete"},
	"/v1/namespaces/{ns}/blacklist":                  {"get", "post", "delete"},
	"/v1/namespaces/{ns}/conflict-allowlist":         {"get", "post", "delete"},
	"/v1/health":                                     {"get"},
	"/v1/health/ready":                               {"get"},
	"/metrics":                                       {"get"},
	"/v1/admin/projections/{name}:reset":             {"post"},
	"/v1/erasures":                                   {"post"},
	"/v1/erasures/{erasure_id}":                      {"get"},
	"/v1/exports":                                    {"get"},
	"/v1/namespaces/{ns}:snapshot":                   {"post"},
	"/v1/namespaces/{ns}:restore":                    {"post"},
	"/v1/namespaces/{ns}:rollback":                   {"post"},
	"/v1/namespaces/{ns}/memories:bulkGet":           {"post"},
	"/v1/namespaces/{ns}/memories/{key}:decide":      {"post"},
	"/v1/namespaces/{ns}/blacklist:sweep":            {"post"},
	"/v1/admin/tokens":                               {"post", "get"},
	"/v1/admin/tokens/{token_id}":                    {"delete"},
	"/v1/token":                                      {"get"},
	"/v1/namespaces/{ns}/memories/{key}:unsupersede": {"post"},
	"/v1/namespaces/{ns}/memories:ask":               {"post"},
	// Categories and the namespace's diagnostic reports (issue 33's remainder).
	"/v1/namespaces/{ns}/memories/{key}:assign_category": {"post"},
	"/v1/namespaces/{ns}/categories":                     {"get"},
	"/v1/namespaces/{ns}/validate":                       {"get"},
	"/v1/namespaces/{ns}/tune":                           {"get"},
}

// customMethodRoutes are registered routes whose last path segment is
// "{param}:{method}": Fiber registers the one route, its handler splits the segment at
// the last colon and dispatches on the method, and the spec documents one path per
// method ("/v1/namespaces/{ns}/memories/{key}:pin"). The methods are the keys of the
// named map variables in the named file, so a method added to or removed from the code
// without the spec fails TestRoutesInCodeMatchTheList.
var customMethodRoutes = map[string]struct {
	method, file string
	methods      []string
}{
	"/v1/namespaces/{ns}/memories/{key}": {method: "post", file: "../command/copy.go", methods: []string{"keyMethods", "keyHandlers"}},
	"/v1/memories/{memory_id}":           {method: "post", file: "../command/handlers.go", methods: []string{"idMethods"}},
}

// paramNames maps a Fiber route parameter to the name the spec gives it.
var paramNames = map[string]string{"id": "memory_id"}

// routeFiles are the Go files that register HTTP routes.
var routeFiles = []string{
	"../command/service.go",
	"../query/service.go",
	"../knowledge/command/service.go",
	"../knowledge/query/service.go",
	"../cmd/loomd/app/health.go",
	"../cmd/loomd/app/admin.go",
}

func readSpec(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSpecIsPlainYAMLText(t *testing.T) {
	spec := readSpec(t)
	for i, line := range strings.Split(spec, "\n") {
		if strings.Contains(line, "\t") {
			t.Errorf("%s:%d: tab character (YAML indentation must be spaces)", specFile, i+1)
		}
		if strings.HasSuffix(line, "\r") {
			t.Errorf("%s:%d: CRLF line ending", specFile, i+1)
		}
	}
	if !strings.HasPrefix(spec, "openapi: 3.1.") {
		t.Errorf("%s must start with `openapi: 3.1.x`", specFile)
	}
}

// specRoutes reads the path keys and their operations out of the `paths:` section.
func specRoutes(t *testing.T, spec string) map[string][]string {
	t.Helper()
	methodLine := regexp.MustCompile(`^    (get|put|post|delete|patch|head|options|trace):\s*$`)
	out := map[string][]string{}
	inPaths := false
	current := ""
	for _, line := range strings.Split(spec, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if line[0] != ' ' { // a top-level key
			inPaths = line == "paths:"
			continue
		}
		if !inPaths {
			continue
		}
		if strings.HasPrefix(line, "  /") && strings.HasSuffix(line, ":") && !strings.HasPrefix(line, "   ") {
			current = strings.TrimSuffix(strings.TrimPrefix(line, "  "), ":")
			if _, dup := out[current]; dup {
				t.Errorf("path %s documented twice", current)
			}
			out[current] = nil
			continue
		}
		if m := methodLine.FindStringSubmatch(line); m != nil {
			if current == "" {
				t.Fatalf("operation %s outside any path", m[1])
			}
			out[current] = append(out[current], m[1])
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no path keys found under a top-level `paths:`", specFile)
	}
	return out
}

func TestEveryRegisteredRouteIsDocumented(t *testing.T) {
	spec := readSpec(t)
	// The literal key lines, exactly as written.
	for path := range documentedRoutes {
		if !strings.Contains(spec, "\n  "+path+":\n") {
			t.Errorf("path key %q not found under paths:", path+":")
		}
	}
	got := specRoutes(t, spec)
	for path, methods := range documentedRoutes {
		have, ok := got[path]
		if !ok {
			t.Errorf("route %s is not documented", path)
			continue
		}
		for _, m := range methods {
			if !slices.Contains(have, m) {
				t.Errorf("%s %s is not documented", strings.ToUpper(m), path)
			}
		}
	}
	// Nor does the spec document a route the server does not have.
	for path, methods := range got {
		for _, m := range methods {
			if !slices.Contains(documentedRoutes[path], m) {
				t.Errorf("%s %s is documented but the server registers no such route", strings.ToUpper(m), path)
			}
		}
	}
}

// TestRoutesInCodeMatchTheList reads the route registrations out of the Go source, so
// a route added to the code without the spec fails here.
func TestRoutesInCodeMatchTheList(t *testing.T) {
	code := map[string][]string{}
	for _, f := range routeFiles {
		for path, methods := range registeredRoutes(t, f) {
			code[path] = append(code[path], methods...)
		}
	}
	// A custom-method route stands for one documented path per method it dispatches.
	for path, cm := range customMethodRoutes {
		i := slices.Index(code[path], cm.method)
		if i < 0 {
			t.Errorf("customMethodRoutes names %s %s, which no route file registers", strings.ToUpper(cm.method), path)
			continue
		}
		code[path] = slices.Delete(code[path], i, i+1)
		if len(code[path]) == 0 {
			delete(code, path)
		}
		for _, name := range cm.methods {
			for _, m := range mapKeys(t, cm.file, name) {
				code[path+":"+m] = append(code[path+":"+m], cm.method)
			}
		}
	}
	for path, methods := range code {
		for _, m := range methods {
			if !slices.Contains(documentedRoutes[path], m) {
				t.Errorf("the server registers %s %s; document it in %s and add it to documentedRoutes", strings.ToUpper(m), path, specFile)
			}
		}
	}
	for path, methods := range documentedRoutes {
		for _, m := range methods {
			if !slices.Contains(code[path], m) {
				t.Errorf("documentedRoutes lists %s %s but no route file registers it", strings.ToUpper(m), path)
			}
		}
	}
}

var fiberParam = regexp.MustCompile(`:([A-Za-z_][A-Za-z0-9_]*)`)

// registeredRoutes finds calls x.Get/Put/Post/Delete/Patch("/path", ...) in a file,
// prefixed by the x := r.Group("/prefix", ...) they hang from, in OpenAPI spelling.
func registeredRoutes(t *testing.T, file string) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	prefix := map[string]string{}
	out := map[string][]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if len(n.Lhs) != 1 || len(n.Rhs) != 1 {
				return true
			}
			id, ok := n.Lhs[0].(*ast.Ident)
			call, ok2 := n.Rhs[0].(*ast.CallExpr)
			if !ok || !ok2 {
				return true
			}
			if recv, name, lit, ok := selectorCall(call); ok && name == "Group" {
				prefix[id.Name] = prefix[recv] + lit
			}
		case *ast.CallExpr:
			recv, name, lit, ok := selectorCall(n)
			if !ok || !strings.HasPrefix(lit, "/") {
				return true
			}
			switch name {
			case "Get", "Put", "Post", "Delete", "Patch":
				path := openAPIPath(prefix[recv] + lit)
				out[path] = append(out[path], strings.ToLower(name))
			}
		}
		return true
	})
	if len(out) == 0 {
		t.Fatalf("%s registers no routes: has the registration moved?", file)
	}
	return out
}

// mapKeys returns the string keys of the composite literal a package-level
// `var name = map[string]...{...}` of file is initialised with.
func mapKeys(t *testing.T, file, name string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	found := false
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if id.Name != name || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.CompositeLit)
				if !ok {
					t.Fatalf("%s: %s is not initialised with a map literal", file, name)
				}
				found = true
				for _, elt := range lit.Elts {
					kv, ok := elt.(*ast.KeyValueExpr)
					if !ok {
						t.Fatalf("%s: %s has an element that is not key: value", file, name)
					}
					bl, ok := kv.Key.(*ast.BasicLit)
					if !ok || bl.Kind != token.STRING {
						t.Fatalf("%s: %s has a key that is not a string literal", file, name)
					}
					k, err := strconv.Unquote(bl.Value)
					if err != nil {
						t.Fatal(err)
					}
					keys = append(keys, k)
				}
			}
		}
	}
	if !found || len(keys) == 0 {
		t.Fatalf("%s declares no map %s with keys: has it moved?", file, name)
	}
	sort.Strings(keys)
	return keys
}

// selectorCall matches recv.Name("literal", ...).
func selectorCall(call *ast.CallExpr) (recv, name, lit string, ok bool) {
	sel, isSel := call.Fun.(*ast.SelectorExpr)
	if !isSel || len(call.Args) == 0 {
		return "", "", "", false
	}
	x, isIdent := sel.X.(*ast.Ident)
	bl, isLit := call.Args[0].(*ast.BasicLit)
	if !isIdent || !isLit || bl.Kind != token.STRING {
		return "", "", "", false
	}
	s, err := strconv.Unquote(bl.Value)
	if err != nil {
		return "", "", "", false
	}
	return x.Name, sel.Sel.Name, s, true
}

// openAPIPath turns a Fiber route ("/v1/memories/:id", "memories\:search") into the
// spec's spelling ("/v1/memories/{memory_id}", "memories:search").
func openAPIPath(route string) string {
	const colon = "\x00"
	route = strings.ReplaceAll(route, `\:`, colon)
	route = fiberParam.ReplaceAllStringFunc(route, func(m string) string {
		name := m[1:]
		if alias, ok := paramNames[name]; ok {
			name = alias
		}
		return "{" + name + "}"
	})
	return strings.ReplaceAll(route, colon, ":")
}

// errorCodes collects the Code* string constants of a Go file; a constant defined as
// another package's Code* constant is resolved through others.
func errorCodes(t *testing.T, file string, others map[string]map[string]string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Code") || i >= len(vs.Values) {
					continue
				}
				switch v := vs.Values[i].(type) {
				case *ast.BasicLit:
					if v.Kind != token.STRING {
						continue
					}
					s, err := strconv.Unquote(v.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[name.Name] = s
				case *ast.SelectorExpr:
					pkg, ok := v.X.(*ast.Ident)
					if !ok {
						continue
					}
					s, ok := others[pkg.Name][v.Sel.Name]
					if !ok {
						t.Errorf("%s: %s = %s.%s, which this test cannot resolve", file, name.Name, pkg.Name, v.Sel.Name)
						continue
					}
					out[name.Name] = s
				}
			}
		}
	}
	return out
}

// specErrorCodeEnum reads the enum of the Error schema's code property.
func specErrorCodeEnum(t *testing.T, spec string) []string {
	t.Helper()
	lines := strings.Split(spec, "\n")
	start := slices.Index(lines, "    Error:")
	if start < 0 {
		t.Fatal("no components.schemas.Error in the spec")
	}
	var codes []string
	inEnum := false
	enumIndent := 0
	for _, line := range lines[start+1:] {
		if strings.TrimSpace(line) == "" {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if indent <= 4 {
			break // the next schema
		}
		if !inEnum {
			if strings.TrimSpace(line) == "enum:" {
				inEnum, enumIndent = true, indent
			}
			continue
		}
		item, ok := strings.CutPrefix(strings.TrimSpace(line), "- ")
		if indent < enumIndent || !ok {
			break
		}
		codes = append(codes, item)
	}
	if len(codes) == 0 {
		t.Fatal("the Error schema has no code enum")
	}
	return codes
}

func TestEveryErrorCodeIsDocumented(t *testing.T) {
	spec := readSpec(t)
	memrow := errorCodes(t, filepath.Join("..", "internal", "memrow", "memrow.go"), nil)
	for _, want := range []string{"VALIDATION_FAILED", "CHAR_LIMIT_EXCEEDED"} {
		found := false
		for _, v := range memrow {
			found = found || v == want
		}
		if !found {
			t.Errorf("memrow no longer declares %s", want)
		}
	}
	httperr := errorCodes(t, filepath.Join("..", "internal", "httperr", "httperr.go"), map[string]map[string]string{"memrow": memrow})
	if len(httperr) < 10 {
		t.Fatalf("found only %d Code constants in httperr.go: %v", len(httperr), httperr)
	}
	// The idempotency table's codes are internal/idempotency's, which both write sides
	// alias.
	idem := errorCodes(t, filepath.Join("..", "internal", "idempotency", "idempotency.go"), nil)
	for _, want := range []string{"IDEMPOTENT_CONFLICT", "IDEMPOTENT_IN_PROGRESS", "IDEMPOTENT_TAKEN_OVER"} {
		if !slices.Contains(slices.Collect(maps.Values(idem)), want) {
			t.Errorf("internal/idempotency no longer declares %s: has the idempotency table moved?", want)
		}
	}
	// The write side declares codes of its own beside aliases of httperr's and
	// idempotency's: every non-test file of command/ is read.
	command := map[string]string{}
	// So does the knowledge plane's write side (a document the parser refuses).
	for _, f := range append(goFiles(t, filepath.Join("..", "command")), goFiles(t, filepath.Join("..", "knowledge", "command"))...) {
		for name, v := range errorCodes(t, f, map[string]map[string]string{"httperr": httperr, "memrow": memrow, "idempotency": idem}) {
			command[name] = v
		}
	}
	want := map[string]bool{}
	for _, set := range []map[string]string{httperr, memrow, idem, command} {
		for _, v := range set {
			want[v] = true
		}
	}
	enum := specErrorCodeEnum(t, spec)
	for code := range want {
		if !slices.Contains(enum, code) {
			t.Errorf("error code %s is not in the Error schema's code enum", code)
		}
		if !strings.Contains(spec, code) {
			t.Errorf("error code %s does not appear in %s", code, specFile)
		}
	}
	for _, code := range enum {
		if !want[code] {
			t.Errorf("the Error schema's code enum lists %s, which the code does not declare", code)
		}
	}
}

func TestOperationsNameTheirSeedOps(t *testing.T) {
	spec := readSpec(t)
	ops := []string{"memory.set", "memory.get", "memory.get_by_id", "memory.history", "memory.search",
		"memory.pin", "memory.unpin", "memory.lock", "memory.unlock", "memory.reject", "memory.verify", "memory.restore",
		"memory.update", "memory.update_by_id", "memory.delete", "memory.delete_version",
		"memory.clear", "memory.bulk_set", "memory.sweep_expired",
		"namespace.get", "namespace.configure", "blacklist.add", "blacklist.remove",
		"namespace.snapshot", "namespace.restore", "namespace.rollback", "memory.bulk_get", "memory.proposal_decide",
		"erasure.export", "blacklist.sweep",
		"knowledge.add", "knowledge.upsert", "knowledge.bulk_add", "knowledge.delete", "knowledge.restore", "knowledge.get",
		"knowledge.list", "knowledge.search", "knowledge.outline", "knowledge.ingest", "knowledge.ingest_status", "knowledge.ingest_cancel",
		"knowledge.synthesize"}
	// Every op the write side runs under its Idempotency-Key names itself in the code;
	// a new one fails here until the spec documents it.
	for _, op := range idempotentOps(t) {
		if !slices.Contains(ops, op) {
			ops = append(ops, op)
		}
	}
	for _, op := range ops {
		if !strings.Contains(spec, "Implements "+op+".") && !strings.Contains(spec, "Implements "+op+" (") {
			t.Errorf("no operation says it implements %s", op)
		}
	}
	// Every documented operation names the op it implements (a seed's, or Loom's own for
	// the operational routes the seeds have none for), and says it implements it.
	for _, o := range specOperations(t, spec) {
		m := seedOpLine.FindStringSubmatch(o.block)
		if m == nil {
			t.Errorf("%s %s has no x-loom-seed-op", strings.ToUpper(o.method), o.path)
			continue
		}
		if !strings.Contains(o.block, "Implements "+m[1]+".") && !strings.Contains(o.block, "Implements "+m[1]+" (") {
			t.Errorf("%s %s: x-loom-seed-op %s, but its description does not say it implements it", strings.ToUpper(o.method), o.path, m[1])
		}
	}
	ids := regexp.MustCompile(`(?m)^\s+operationId:\s*(\S+)\s*$`).FindAllStringSubmatch(spec, -1)
	var seen []string
	for _, m := range ids {
		if slices.Contains(seen, m[1]) {
			t.Errorf("operationId %s used twice", m[1])
		}
		seen = append(seen, m[1])
	}
	n := 0
	for _, methods := range documentedRoutes {
		n += len(methods)
	}
	if len(seen) != n {
		sort.Strings(seen)
		t.Errorf("%d operationIds %v for %d operations", len(seen), seen, n)
	}
}

var seedOpLine = regexp.MustCompile(`(?m)^      x-loom-seed-op: (\S+)\s*$`)

// specOperation is one operation of the spec: its path, method and text.
type specOperation struct{ path, method, block string }

// specOperations cuts the `paths:` section into operations: each runs from its method
// line (column 4) to the next method, path or top-level key.
func specOperations(t *testing.T, spec string) []specOperation {
	t.Helper()
	methodLine := regexp.MustCompile(`^    (get|put|post|delete|patch|head|options|trace):\s*$`)
	var out []specOperation
	var cur *specOperation
	flush := func() {
		if cur != nil {
			out = append(out, *cur)
			cur = nil
		}
	}
	inPaths, path := false, ""
	for _, line := range strings.Split(spec, "\n") {
		if line != "" && line[0] != ' ' && !strings.HasPrefix(line, "#") {
			flush()
			inPaths = line == "paths:"
			continue
		}
		if !inPaths {
			continue
		}
		if strings.HasPrefix(line, "  /") && !strings.HasPrefix(line, "   ") {
			flush()
			path = strings.TrimSuffix(strings.TrimPrefix(line, "  "), ":")
			continue
		}
		if m := methodLine.FindStringSubmatch(line); m != nil {
			flush()
			cur = &specOperation{path: path, method: m[1]}
			continue
		}
		if strings.HasPrefix(line, "    ") && !strings.HasPrefix(line, "     ") {
			flush() // the path's own `parameters:`, or another key at the method's level
			continue
		}
		if cur != nil {
			cur.block += line + "\n"
		}
	}
	flush()
	if len(out) == 0 {
		t.Fatal("no operations found under paths:")
	}
	return out
}

// goFiles lists the non-test Go files of a directory.
func goFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		out = append(out, filepath.Join(dir, e.Name()))
	}
	if len(out) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return out
}

// idempotentOps reads out of command/ the seed ops that run under an Idempotency-Key:
// the literal op of every s.measured(c, "memory.x", ...) and s.measuredWithin call, the op of every copyOp
// literal (handleKeyMethod and handleDelete pass a copyOp's op to measured), and every
// string assigned to a copyOp's op field (memory.delete_version).
func idempotentOps(t *testing.T) []string {
	t.Helper()
	var ops []string
	add := func(e ast.Expr) {
		bl, ok := e.(*ast.BasicLit)
		if !ok || bl.Kind != token.STRING {
			return
		}
		s, err := strconv.Unquote(bl.Value)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ops, s) {
			ops = append(ops, s)
		}
	}
	measuredCalls := 0
	for _, file := range goFiles(t, filepath.Join("..", "command")) {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "measured" && len(n.Args) == 3 ||
					sel.Sel.Name == "measuredWithin" && len(n.Args) == 4) {
					measuredCalls++
					add(n.Args[1])
				}
			case *ast.CompositeLit:
				opField := func(lit *ast.CompositeLit) {
					for _, elt := range lit.Elts {
						if kv, ok := elt.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "op" {
								add(kv.Value)
							}
						}
					}
				}
				switch typ := n.Type.(type) {
				case *ast.Ident: // copyOp{op: ...}
					if typ.Name == "copyOp" {
						opField(n)
					}
				case *ast.MapType: // map[string]copyOp{"pin": {op: ...}}, the element type elided
					if v, ok := typ.Value.(*ast.Ident); ok && v.Name == "copyOp" {
						for _, elt := range n.Elts {
							if kv, ok := elt.(*ast.KeyValueExpr); ok {
								if lit, ok := kv.Value.(*ast.CompositeLit); ok {
									opField(lit)
								}
							}
						}
					}
				}
			case *ast.AssignStmt:
				for i, lhs := range n.Lhs {
					if sel, ok := lhs.(*ast.SelectorExpr); ok && sel.Sel.Name == "op" && i < len(n.Rhs) {
						add(n.Rhs[i])
					}
				}
			}
			return true
		})
	}
	if measuredCalls == 0 || len(ops) == 0 {
		t.Fatal("found no s.measured calls or copyOp literals in command/: has the write path moved?")
	}
	// The knowledge plane's writes run under their key through s.idempotent(c, p, "knowledge.x", run).
	knowledgeCalls := 0
	for _, file := range goFiles(t, filepath.Join("..", "knowledge", "command")) {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "idempotent" && len(call.Args) == 4 {
					knowledgeCalls++
					add(call.Args[2])
				}
			}
			return true
		})
	}
	if knowledgeCalls == 0 {
		t.Fatal("found no s.idempotent calls in knowledge/command/: has the knowledge write path moved?")
	}
	sort.Strings(ops)
	return ops
}

// TestIdempotencyKeyIsDocumented checks that an operation lists the Idempotency-Key
// header exactly when the code runs it under one.
func TestIdempotencyKeyIsDocumented(t *testing.T) {
	spec := readSpec(t)
	ops := idempotentOps(t)
	for _, want := range []string{"memory.set", "memory.pin", "memory.delete", "memory.delete_version", "memory.bulk_set"} {
		if !slices.Contains(ops, want) {
			t.Errorf("the code no longer runs %s under an Idempotency-Key (found %v)", want, ops)
		}
	}
	if !strings.Contains(spec, "\n    IdempotencyKey:\n      name: Idempotency-Key\n      in: header\n") {
		t.Fatal("no components.parameters.IdempotencyKey header parameter")
	}
	const ref = "$ref: '#/components/parameters/IdempotencyKey'"
	seen := map[string]bool{}
	for _, o := range specOperations(t, spec) {
		op := ""
		if m := seedOpLine.FindStringSubmatch(o.block); m != nil {
			op = m[1]
		}
		seen[op] = true
		has := strings.Contains(o.block, ref)
		switch {
		case slices.Contains(ops, op) && !has:
			t.Errorf("%s %s (%s) runs under an Idempotency-Key but does not list the IdempotencyKey parameter", strings.ToUpper(o.method), o.path, op)
		case !slices.Contains(ops, op) && has:
			t.Errorf("%s %s (%s) lists the IdempotencyKey parameter, but the code does not honour it", strings.ToUpper(o.method), o.path, op)
		}
	}
	for _, op := range ops {
		// memory.delete_version is memory.delete's operation with ?version.
		if !seen[op] && op != "memory.delete_version" {
			t.Errorf("no operation has x-loom-seed-op %s", op)
		}
	}
}

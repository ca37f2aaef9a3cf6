package schemas_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The spec is checked textually, so the module needs no YAML dependency: the layout
// it relies on is two-space indentation, path keys at column 2 under a top-level
// `paths:`, and operations at column 4 under their path.

const specFile = "openapi.yaml"

// documentedRoutes is every (path, method) the server registers, as the spec must
// spell it. TestRoutesInCodeMatchTheList keeps this list honest against the code.
var documentedRoutes = map[string][]string{
	"/v1/namespaces/{ns}/memories/{key}":         {"get", "put"},
	"/v1/namespaces/{ns}/memories/{key}/history": {"get"},
	"/v1/memories/{memory_id}":                   {"get"},
	"/v1/namespaces/{ns}/memories:search":        {"post"},
	"/v1/health":                                 {"get"},
	"/v1/health/ready":                           {"get"},
	"/metrics":                                   {"get"},
	"/v1/admin/projections/{name}:reset":         {"post"},
}

// paramNames maps a Fiber route parameter to the name the spec gives it.
var paramNames = map[string]string{"id": "memory_id"}

// routeFiles are the Go files that register HTTP routes.
var routeFiles = []string{
	"../command/service.go",
	"../query/service.go",
	"../internal/node/health.go",
	"../internal/node/admin.go",
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
	want := map[string]bool{}
	for _, set := range []map[string]string{httperr, memrow} {
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
	for _, op := range []string{"memory.set", "memory.get", "memory.get_by_id", "memory.history", "memory.search"} {
		if !strings.Contains(spec, "Implements "+op+".") && !strings.Contains(spec, "Implements "+op+" (") {
			t.Errorf("no operation says it implements %s", op)
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

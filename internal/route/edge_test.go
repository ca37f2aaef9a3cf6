package route

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// The handlers of command/ and query/ decode HTTP and call plain functions: no code of
// those packages outside handlers.go sees a request (*fiber.Ctx).
func TestOnlyHandlersSeeTheRequest(t *testing.T) {
	for _, dir := range []string{"../../command", "../../query"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		handlers := false
		for _, f := range files {
			name := filepath.Base(f)
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			if name == "handlers.go" {
				handlers = true
				continue
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(parsed, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Ctx" {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "fiber" {
						t.Errorf("%s/%s refers to fiber.Ctx: operation code takes plain requests; decode in handlers.go", filepath.Base(dir), name)
						return false
					}
				}
				return true
			})
		}
		if !handlers {
			t.Errorf("%s has no handlers.go", dir)
		}
	}
}

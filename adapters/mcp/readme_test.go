package mcp_test

import (
	"context"
	"os"
	"strings"
	"testing"
)

// The README's MCP paragraph names every tool a client is offered: a user reads the
// list there to learn what an agent can call.
func TestReadmeNamesEveryTool(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var para string
	for _, p := range strings.Split(string(b), "\n* ") {
		if strings.HasPrefix(p, "**MCP.**") {
			para = p
		}
	}
	if para == "" {
		t.Fatal("README.md has no **MCP.** paragraph")
	}
	res, err := connect(t, "loom_t_s").ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if !strings.Contains(para, "`"+tl.Name+"`") {
			t.Errorf("README.md's MCP paragraph does not name the tool %s", tl.Name)
		}
	}
}

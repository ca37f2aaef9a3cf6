package e2e

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

var (
	turnCiteRE      = regexp.MustCompile(`\[t:([0-9a-f-]{36})\]`)
	knowledgeCiteRE = regexp.MustCompile(`\[k:([0-9a-f-]{36})@(\d+)#(\d+)\]`)
)

// context.pack reads the planes beside memory: the session's last turns (the
// conversation's record, memory.observe) and the knowledge chunks that answer the
// query (knowledge.search), each line citing its turn or its document version; a
// token bound to alice packs none of bob's turns.
func TestContextPackCarriesTheSessionAndTheKnowledge(t *testing.T) {
	n, raw, org := env.SharedOrgAPI(t)
	c, err := client.New(raw.URL, raw.Token)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := testenv.Unique(t, "layers")
	observe := func(user, session string, turns ...client.ObservedTurn) []string {
		t.Helper()
		a, err := c.Observe(ctx, ns, client.ObserveRequest{Turns: turns, Identity: client.Identity{UserID: user, SessionID: session}})
		if err != nil {
			t.Fatalf("observe: %v", err)
		}
		ids := []string{}
		for _, k := range a.Turns {
			ids = append(ids, k.TurnID)
		}
		return ids
	}
	alice := observe("alice", "s1",
		client.ObservedTurn{Role: "user", Content: "I am flying to Reykjavik on Friday"},
		client.ObservedTurn{Role: "assistant", Content: "Noted: Reykjavik, Friday"})
	observe("bob", "s1", client.ObservedTurn{Role: "user", Content: "bob's secret is zanzibar-77"})
	policy := "Travel over 500 euros needs a manager's approval before booking."
	doc, err := c.AddDocument(ctx, ns, client.DocumentInput{SourceURI: "handbook/travel.txt", Content: &policy})
	if err != nil {
		t.Fatalf("add document: %v", err)
	}

	pack := func(c *client.Client, user string) *client.PackAnswer {
		t.Helper()
		a, err := c.Pack(ctx, ns, client.PackRequest{Query: "who approves travel bookings", UserID: user, SessionID: "s1"})
		if err != nil {
			t.Fatalf("pack: %v", err)
		}
		return a
	}
	a := pack(c, "alice")
	if !strings.Contains(a.Block, "Reykjavik on Friday") || !strings.Contains(a.Block, "manager's approval") {
		t.Fatalf("the pack lacks the session's turns or the knowledge chunk:\n%s", a.Block)
	}
	cited := map[string]bool{}
	for _, m := range turnCiteRE.FindAllStringSubmatch(a.Block, -1) {
		cited[m[1]] = true
	}
	for _, id := range alice {
		if !cited[id] {
			t.Errorf("turn %s is not cited:\n%s", id, a.Block)
		}
	}
	k := knowledgeCiteRE.FindStringSubmatch(a.Block)
	if k == nil || k[1] != doc.DocID || k[2] != doc.VersionText {
		t.Errorf("knowledge citation %v, want the document %s@%s:\n%s", k, doc.DocID, doc.VersionText, a.Block)
	}

	bound := testenv.NewClient(raw.URL, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleReader, ReadUserID: "alice"}))
	r := bound.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/context:pack", []byte(`{"query": "secret", "user_id": "bob", "session_id": "s1"}`))
	if r.Status != http.StatusOK || strings.Contains(string(r.Body), "zanzibar") {
		t.Fatalf("a token bound to alice packed bob's turn: %d %s", r.Status, r.Body)
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// citeRE finds a pack's memory citations, m:<memory_id>@<version>.
var citeRE = regexp.MustCompile(`\[m:([0-9a-f-]{36})@(\d+)\]`)

// context.pack answers a cited block within its budget: every citation resolves to a
// memory version through memory.get_by_id and memory.history, the same state packs to
// the same bytes, a token bound to alice never packs bob's rows, and bad input is a
// 422 naming its field. The typed client's calls go through the spec's check.
func TestContextPackCitesResolvableVersionsWithinBudget(t *testing.T) {
	n, raw, org := env.SharedOrgAPI(t)
	check := newSpecCheck(t, raw.URL)
	c, err := client.New(raw.URL, raw.Token, client.WithHTTPClient(&http.Client{Transport: check}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := testenv.Unique(t, "pack")
	raw.AppendOnly(t, ns)
	put := func(key string, body map[string]any) {
		t.Helper()
		if r := raw.Put(t, ns, key, body); r.Status != http.StatusOK {
			t.Fatalf("set %s: %d %s", key, r.Status, r.Body)
		}
	}
	put("drink", map[string]any{"value": "alice drinks green tea every morning", "user_id": "alice", "tags": []string{"habit"}})
	put("city", map[string]any{"value": "alice lives in Lisbon", "user_id": "alice"})
	put("city", map[string]any{"value": "alice lives in Porto", "user_id": "alice"})
	put("drink", map[string]any{"value": "bob drinks " + bobMarker + " coffee", "user_id": "bob"})
	testenv.WaitProjected(t, env.PG(t), "main", org, ns)

	budget := 120
	req := client.PackRequest{Query: "what does alice drink", UserID: "alice", BudgetTokens: &budget, Model: "gpt-4o"}
	a := packAlicesFactsWithinBudget(t, ctx, c, ns, req, budget)
	packCitationsResolve(t, ctx, c, ns, a)
	packSameStateSameBytes(t, raw, ns, req.Query, budget)
	packSmallBudgetCuts(t, ctx, c, ns, req)
	packStackMatchesPack(t, ctx, c, ns, req, a)
	packBoundToAliceLeavesBobOut(t, n, raw, org, ns)
	packBadInputNamesItsField(t, raw, ns)
}

// packAlicesFactsWithinBudget packs alice's facts at the budget: the block holds them
// and none of bob's, counted with gpt-4o's tokenizer. The later steps check its answer.
func packAlicesFactsWithinBudget(t *testing.T, ctx context.Context, c *client.Client, ns string, req client.PackRequest, budget int) *client.PackAnswer {
	a, err := c.Pack(ctx, ns, req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(a.Block, "green tea") || !strings.Contains(a.Block, "Porto") || a.Tokens > budget || a.Tokens == 0 {
		t.Fatalf("pack (%d of %d tokens):\n%s", a.Tokens, budget, a.Block)
	}
	if strings.Contains(a.Block, bobMarker) {
		t.Fatalf("alice's pack holds bob's row:\n%s", a.Block)
	}
	t.Logf("the pack (%d of %d tokens):\n%s", a.Tokens, budget, a.Block)
	if a.Tokenizer.Encoding != "o200k_base" || a.Tokenizer.Approximate {
		t.Errorf("gpt-4o counted with %+v", a.Tokenizer)
	}
	for _, s := range a.Sections {
		if s.Name == "profile" && (!s.Available || s.Note != "the user has no profile" || len(s.Lines) != 0) {
			t.Errorf("profile section: %+v", s)
		}
	}
	return a
}

// packCitationsResolve checks the pack's citations are listed once each in the
// block's order, and each resolves through memory.get_by_id and memory.history.
func packCitationsResolve(t *testing.T, ctx context.Context, c *client.Client, ns string, a *client.PackAnswer) {
	// Every citation resolves: the id names the key, whose history holds the version.
	cites := citeRE.FindAllStringSubmatch(a.Block, -1)
	if len(cites) < 2 {
		t.Fatalf("want the fact and the change cited:\n%s", a.Block)
	}
	// citations lists the block's citations, each once, in the block's order.
	var inBlock []string
	for _, m := range cites {
		if cite := "m:" + m[1] + "@" + m[2]; !slices.Contains(inBlock, cite) {
			inBlock = append(inBlock, cite)
		}
	}
	if !slices.Equal(a.Citations, inBlock) {
		t.Errorf("citations %v; the block cites %v", a.Citations, inBlock)
	}
	for _, m := range cites {
		head, err := c.GetByID(ctx, m[1])
		if err != nil {
			t.Fatalf("%s: %v", m[0], err)
		}
		h, err := c.History(ctx, ns, head.MemoryKey, client.Identity{Agent: head.Agent, UserID: head.UserID, SessionID: head.SessionID})
		if err != nil {
			t.Fatalf("%s: %v", m[0], err)
		}
		v, _ := strconv.ParseInt(m[2], 10, 64)
		if !slices.ContainsFunc(h.Versions, func(x client.Version) bool { return x.Version == v }) {
			t.Errorf("%s: %s holds no version %d", m[0], head.MemoryKey, v)
		}
	}
}

// packSameStateSameBytes packs the same state twice in each rendering: the answers
// must be byte for byte the same.
func packSameStateSameBytes(t *testing.T, raw *testenv.Client, ns, query string, budget int) {
	// The same state, the same bytes: the whole answer, in either rendering.
	for _, format := range []string{"markdown", "json"} {
		body, _ := json.Marshal(map[string]any{"query": query, "user_id": "alice", "budget_tokens": budget, "model": "gpt-4o", "format": format})
		first := raw.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/context:pack", body)
		second := raw.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/context:pack", body)
		if first.Status != http.StatusOK || string(first.Body) != string(second.Body) {
			t.Fatalf("the same state packed differently (%s):\n%s\n%s", format, first.Body, second.Body)
		}
	}
}

// packSmallBudgetCuts packs the same request at 40 tokens: the block still fits and
// the answer says what it cut and why.
func packSmallBudgetCuts(t *testing.T, ctx context.Context, c *client.Client, ns string, req client.PackRequest) {
	// A small budget cuts, and says what and why; the block still fits.
	small := 40
	req.BudgetTokens = &small
	cut, err := c.Pack(ctx, ns, req)
	if err != nil {
		t.Fatal(err)
	}
	if cut.Tokens > small || len(cut.Cut) == 0 || cut.Cut[0].Reason == "" {
		t.Fatalf("a 40-token pack: %d tokens, cut %+v:\n%s", cut.Tokens, cut.Cut, cut.Block)
	}
}

// packStackMatchesPack asks memory.stack for the request at the full budget: the same
// layers as the pack, each line with its source.
func packStackMatchesPack(t *testing.T, ctx context.Context, c *client.Client, ns string, req client.PackRequest, a *client.PackAnswer) {
	// memory.stack: the same layers, each line with its source.
	st, err := c.Stack(ctx, ns, req)
	if err != nil {
		t.Fatal(err)
	}
	if st.Tokens != a.Tokens || len(st.Sections) != len(a.Sections) || len(st.Sections[1].Lines) == 0 || len(st.Sections[1].Lines[0].Source) == 0 {
		t.Fatalf("stack %+v against pack %+v", st, a)
	}
}

// packBoundToAliceLeavesBobOut packs with a token bound to alice, naming bob or no
// one: bob's row is never in the answer.
func packBoundToAliceLeavesBobOut(t *testing.T, n *app.Process, raw *testenv.Client, org, ns string) {
	// A token bound to alice packs alice's rows, whichever user it names.
	bound := testenv.NewClient(raw.URL, env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleReader, ReadUserID: "alice"}))
	for _, body := range []string{`{"query": "who drinks coffee", "user_id": "bob"}`, `{"query": "who drinks coffee"}`, `{"query": "who drinks coffee", "format": "json"}`} {
		r := bound.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/context:pack", []byte(body))
		if r.Status != http.StatusOK || strings.Contains(string(r.Body), bobMarker) {
			t.Fatalf("a token bound to alice: %s: %d %s", body, r.Status, r.Body)
		}
	}
}

// packBadInputNamesItsField sends bad requests: each is a 422 naming its field.
func packBadInputNamesItsField(t *testing.T, raw *testenv.Client, ns string) {
	// Bad input names its field.
	for _, cs := range []struct{ body, field string }{
		{`{"budget_tokens": 0}`, "budget_tokens"},
		{`{"budget_tokens": -5}`, "budget_tokens"},
		{`{"budget_tokens": 1000000000000}`, "budget_tokens"},
		{`{"budget_tokens": 2.5}`, "budget_tokens"},
		{`{"sections": ["facts", "gossip"]}`, "sections"},
		{`{"tokenizer": "p50k_base"}`, "tokenizer"},
		{`{"model": "frobnicator-9"}`, "model"},
		{`{"format": "yaml"}`, "format"},
		{`{"per_key": -1}`, "per_key"},
	} {
		r := raw.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/context:pack", []byte(cs.body))
		e, _ := r.JSON(t)["error"].(map[string]any)
		if r.Status != http.StatusUnprocessableEntity || e["field"] != cs.field {
			t.Errorf("%s: %d %s, want 422 naming %s", cs.body, r.Status, r.Body, cs.field)
		}
	}
}

// memory.timeline, memory.related, memory.aggregate and memory.statuses, each as a user
// would notice it, through the typed client and the spec's check.
func TestTimelineRelatedAggregateStatuses(t *testing.T) {
	_, raw, org := env.SharedOrgAPI(t)
	c, err := client.New(raw.URL, raw.Token, client.WithHTTPClient(&http.Client{Transport: newSpecCheck(t, raw.URL)}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := testenv.Unique(t, "reads")
	raw.AppendOnly(t, ns)
	put := func(key string, body map[string]any) {
		t.Helper()
		body["user_id"] = "alice"
		if r := raw.Put(t, ns, key, body); r.Status != http.StatusOK {
			t.Fatalf("set %s: %d %s", key, r.Status, r.Body)
		}
	}
	put("city", map[string]any{"value": "alice lives in Lisbon", "valid_at": "2020-01-01T00:00:00Z", "tags": []string{"home"}})
	put("city", map[string]any{"value": "alice lives in Porto", "valid_at": "2024-06-01T00:00:00Z", "tags": []string{"home"}})
	put("drink", map[string]any{"value": "alice drinks green tea", "entities": []string{"Green Tea"}, "tags": []string{"habit"}})
	put("shop", map[string]any{"value": "alice buys her tea at Cha Loja", "entities": []string{"Green Tea", "Cha Loja"}, "tags": []string{"habit"}})
	put("gone", map[string]any{"value": "alice once kept a parrot"})
	if r := raw.Do(t, http.MethodDelete, "/v1/namespaces/"+ns+"/memories/gone?user_id=alice", nil); r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := raw.Put(t, ns, "drink", map[string]any{"value": "bob drinks coffee", "user_id": "bob", "tags": []string{"habit"}}); r.Status != http.StatusOK {
		t.Fatalf("bob: %d %s", r.Status, r.Body)
	}
	testenv.WaitProjected(t, env.PG(t), "main", org, ns)
	alice := client.Identity{UserID: "alice"}

	// The timeline: Lisbon held from 2020 until Porto began in 2024.
	tl, err := c.Timeline(ctx, ns, client.TimelineQuery{Identity: alice, Key: "city"})
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Entries) != 2 || !strings.Contains(string(tl.Entries[0].Value), "Lisbon") || tl.Entries[0].ValidTo == nil ||
		!tl.Entries[0].ValidTo.Equal(tl.Entries[1].ValidFrom) || tl.Entries[1].ValidFrom.Year() != 2024 {
		t.Fatalf("city's timeline: %+v", tl.Entries)
	}
	// A subject's: the facts naming Green Tea.
	if tl, err = c.Timeline(ctx, ns, client.TimelineQuery{Identity: alice, Entity: "green tea"}); err != nil || tl.Keys != 2 {
		t.Fatalf("Green Tea's timeline: %+v %v", tl, err)
	}

	// Related: the shop names the drink's entity.
	rel, err := c.Related(ctx, ns, "drink", alice, 0)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(rel.Neighbors, func(m client.RelatedMemory) bool { return m.MemoryKey == "shop" })
	if i < 0 || !slices.Contains(rel.Neighbors[i].Via, "graph") || !slices.Contains(rel.Neighbors[i].SharedEntities, "Green Tea") {
		t.Fatalf("drink's neighbours: %+v", rel.Neighbors)
	}

	// Aggregate: alice's live facts by tag; the deleted one and bob's are not counted.
	ag, err := c.Aggregate(ctx, ns, client.AggregateQuery{Identity: alice, By: []string{"tag", "type"}})
	if err != nil {
		t.Fatal(err)
	}
	if ag.Total != 3 || len(ag.By["tag"]) != 2 || ag.By["tag"][0] != (client.Bucket{Value: "habit", Count: 2}) {
		t.Fatalf("aggregate: %+v", ag)
	}

	// Statuses: live, deleted and missing in one call, in the order asked.
	sts, err := c.Statuses(ctx, ns, []client.BulkGetKey{{MemoryKey: "city", Identity: alice}, {MemoryKey: "gone", Identity: alice},
		{MemoryKey: "never", Identity: alice}})
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, s := range sts {
		states = append(states, s.State)
	}
	if strings.Join(states, ",") != "live,deleted,missing" || sts[0].Status != "active" || sts[0].MemoryID == "" {
		t.Fatalf("statuses: %+v", sts)
	}
}

package spend

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/devstack"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/internal/pg"
	pgmigrations "github.com/loomplane/loom/schemas/postgres"
)

var pool *pgxpool.Pool

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s, err := devstack.Start(ctx, devstack.Options{SkipClickHouse: true, SkipKafka: true})
	if err != nil {
		// A store the tests need that cannot start fails the run; it never skips.
		os.Stderr.WriteString("start Postgres: " + err.Error() + "\n")
		os.Exit(1)
	}
	pool, err = pg.Open(ctx, pg.PoolConfig{DSN: s.Postgres.DSN()})
	if err == nil {
		_, err = pg.Migrate(ctx, pool, pgmigrations.Files, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	cancel()
	if err != nil {
		os.Stderr.WriteString("migrate Postgres: " + err.Error() + "\n")
		s.Stop()
		os.Exit(1)
	}
	code := m.Run()
	pool.Close()
	s.Stop()
	os.Exit(code)
}

// org is a fresh org per test, so tests share the database without seeing each other.
func org(t *testing.T) string {
	return "org-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
}

var day1 = time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)

func TestChargesAddUpPerNamespaceDayAndPurpose(t *testing.T) {
	ctx := context.Background()
	l, o := NewLedger(pool), org(t)
	for _, c := range []llm.Charge{
		{Bill: llm.Bill{Org: o, Namespace: "a", Purpose: llm.PurposeExtraction}, Day: day1, Model: "m", PromptTokens: 100, CompletionTokens: 10, CostUSD: 0.25},
		{Bill: llm.Bill{Org: o, Namespace: "a", Purpose: llm.PurposeExtraction}, Day: day1, Model: "m", PromptTokens: 50, CompletionTokens: 5, CostUSD: 0.125},
		{Bill: llm.Bill{Org: o, Namespace: "a", Purpose: llm.PurposeConflictResolver}, Day: day1, Model: "judge", PromptTokens: 7, CostUSD: 0.5},
		{Bill: llm.Bill{Org: o, Namespace: "b", Purpose: llm.PurposeExtraction}, Day: day1, Model: "m", CostUSD: 4},
		{Bill: llm.Bill{Org: o, Namespace: "a", Purpose: llm.PurposeExtraction}, Day: day1.Add(24 * time.Hour), Model: "m", CostUSD: 8},
		{Bill: llm.Bill{Org: o + "-other", Namespace: "a", Purpose: llm.PurposeExtraction}, Day: day1, Model: "m", CostUSD: 16},
	} {
		if err := l.Charge(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	s, err := l.Spent(ctx, o, "a", day1, llm.PurposeConflictResolver)
	if err != nil {
		t.Fatal(err)
	}
	if s.TotalUSD != 0.875 || s.PurposeUSD != 0.5 || s.NamespaceCapUSD != nil {
		t.Fatalf("spent %+v, want $0.875 in all, $0.5 by the resolver, no namespace cap", s)
	}
	rows, err := l.Read(ctx, o, "a", day1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Purpose != llm.PurposeConflictResolver || rows[1].Calls != 2 || rows[1].Prompt != 150 || rows[1].Completion != 15 || rows[1].CostUSD != 0.375 {
		t.Fatalf("rows %+v", rows)
	}
}

func TestTheNamespaceConfigSetsItsCap(t *testing.T) {
	ctx := context.Background()
	l, o := NewLedger(pool), org(t)
	if _, err := pool.Exec(ctx, `INSERT INTO loom.namespaces (org, namespace, config) VALUES
		($1, 'capped', '{"conflict_policy": "auto_reinforce", "daily_cost_cap_usd": 0.05}'),
		($1, 'odd', '{"conflict_policy": "auto_reinforce", "daily_cost_cap_usd": "lots"}')`, o); err != nil {
		t.Fatal(err)
	}
	s, err := l.Spent(ctx, o, "capped", day1, llm.PurposeAsk)
	if err != nil || s.NamespaceCapUSD == nil || *s.NamespaceCapUSD != 0.05 {
		t.Fatalf("capped: %+v %v, want its $0.05", s, err)
	}
	for _, ns := range []string{"odd", "unconfigured"} {
		if s, err := l.Spent(ctx, o, ns, day1, llm.PurposeAsk); err != nil || s.NamespaceCapUSD != nil {
			t.Fatalf("%s: %+v %v, want no cap of its own (the default applies)", ns, s, err)
		}
	}
}

func TestAChargePostgresRefusedIsKeptAndCounted(t *testing.T) {
	ctx := context.Background()
	o := org(t)
	closed, err := pgxpool.New(ctx, pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	l := NewLedger(closed)
	c := llm.Charge{Bill: llm.Bill{Org: o, Namespace: "a", Purpose: llm.PurposeAsk}, Day: day1, Model: "m", CostUSD: 0.5}
	if err := l.Charge(ctx, c); err == nil {
		t.Fatal("a closed pool took the charge")
	}
	l.pool = pool // Postgres is back
	s, err := l.Spent(ctx, o, "a", day1, llm.PurposeAsk)
	if err != nil || s.TotalUSD != 0.5 {
		t.Fatalf("%+v %v, want the kept charge counted", s, err)
	}
	if rows, err := l.Read(ctx, o, "a", day1); err != nil || len(rows) != 1 || rows[0].CostUSD != 0.5 {
		t.Fatalf("rows %+v %v, want the kept charge stored by the next read", rows, err)
	}
}

// The provider, the ledger and the scripted server together: spend lands per org
// and namespace, and the namespace's own cap refuses once reached until the next UTC
// day, across two providers (two processes) sharing the ledger's table.
func TestTheCapHoldsAcrossProcessesAndResetsTheNextDay(t *testing.T) {
	ctx := context.Background()
	o := org(t)
	if _, err := pool.Exec(ctx, `INSERT INTO loom.namespaces (org, namespace, config) VALUES ($1, 'notes', '{"daily_cost_cap_usd": 0.01}')`, o); err != nil {
		t.Fatal(err)
	}
	srv := llmtest.New(t)
	// 3000 tokens in and 1000 out at $1/$2 per million: $0.005 a call.
	srv.Script(func(llmtest.ChatRequest) llmtest.Reply { return llmtest.Text("an answer").WithUsage(3000, 1000) })
	var mu sync.Mutex
	now := day1.Add(22 * time.Hour)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	cfg := config.LLM{BaseURL: srv.URL, Model: "m", Timeout: 5 * time.Second, Concurrency: 2, MaxAttempts: 1, RetryBase: time.Millisecond,
		Prices: map[string]config.Price{"m": {InputPerMTok: 1, OutputPerMTok: 2}}, DailyCostCapUSD: 1, ResolverCapShare: 0.25}
	var procs []*llm.Provider
	for i := 0; i < 2; i++ {
		p, err := llm.New(cfg, llm.Options{Ledger: NewLedger(pool), Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	ask := func(p *llm.Provider, ns string) error {
		_, err := p.Complete(ctx, llm.Request{Bill: llm.Bill{Org: o, Namespace: ns, Purpose: llm.PurposeAsk},
			Messages: []llm.Message{{Role: llm.RoleUser, Content: "what is my city?"}}})
		return err
	}
	if err := ask(procs[0], "notes"); err != nil {
		t.Fatal(err)
	}
	if err := ask(procs[1], "notes"); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		err := ask(p, "notes")
		var e *llm.Error
		if !errors.As(err, &e) || e.Class != llm.ClassCapped || e.CapUSD != 0.01 || math.Abs(e.SpentUSD-0.01) > 1e-9 {
			t.Fatalf("%v, want capped at the namespace's $0.01", err)
		}
	}
	if err := ask(procs[1], "elsewhere"); err != nil {
		t.Fatalf("a namespace under the default cap: %v", err)
	}
	rows, err := NewLedger(pool).Read(ctx, o, "notes", day1)
	if err != nil || len(rows) != 1 || rows[0].Calls != 2 || rows[0].Prompt != 6000 || rows[0].Completion != 2000 || math.Abs(rows[0].CostUSD-0.01) > 1e-9 {
		t.Fatalf("the ledger holds %+v %v, want two calls of 3000+1000 tokens, $0.01", rows, err)
	}
	mu.Lock()
	now = day1.Add(24 * time.Hour)
	mu.Unlock()
	if err := ask(procs[0], "notes"); err != nil {
		t.Fatalf("the next day: %v", err)
	}
	if n := len(srv.Chats()); n != 4 {
		t.Fatalf("%d calls reached the provider, want 4 (the capped ones none)", n)
	}
}

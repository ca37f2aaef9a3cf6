package llm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/internal/metrics"
)

// bookLedger is an in-process llm.Ledger: these tests are about the provider; the
// Postgres ledger has its own tests in spend.
type bookLedger struct {
	mu      sync.Mutex
	charges []llm.Charge
	caps    map[string]float64 // namespace -> its daily_cost_cap_usd
}

func (b *bookLedger) Spent(_ context.Context, org, ns string, day time.Time, purpose llm.Purpose) (llm.Spent, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s llm.Spent
	for _, c := range b.charges {
		if c.Org == org && c.Namespace == ns && c.Day.Equal(day) {
			s.TotalUSD += c.CostUSD
			if c.Purpose == purpose {
				s.PurposeUSD += c.CostUSD
			}
		}
	}
	if v, ok := b.caps[ns]; ok {
		s.NamespaceCapUSD = &v
	}
	return s, nil
}

func (b *bookLedger) Charge(_ context.Context, c llm.Charge) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.charges = append(b.charges, c)
	return nil
}

func (b *bookLedger) all() []llm.Charge {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]llm.Charge(nil), b.charges...)
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func testConfig(baseURL string) config.LLM {
	return config.LLM{
		BaseURL: baseURL, APIKey: "sk-test", Model: "model-default", ExtractionModel: "model-extract",
		ConflictResolverModel: "model-judge", EmbeddingModel: "embed-small",
		Timeout: 5 * time.Second, Concurrency: 4, MaxAttempts: 3, RetryBase: 5 * time.Millisecond,
		// One million tokens cost $1 in and $2 out: a test reads its cost off the tokens.
		Prices:          map[string]config.Price{"model-extract": {InputPerMTok: 1, OutputPerMTok: 2}, "embed-small": {InputPerMTok: 0.5}},
		DefaultPrice:    config.Price{InputPerMTok: 10, OutputPerMTok: 20},
		DailyCostCapUSD: 1, ResolverCapShare: 0.25,
	}
}

type fixture struct {
	srv    *llmtest.Server
	p      *llm.Provider
	ledger *bookLedger
	clock  *clock
	reg    *metrics.Registry
}

func newFixture(t *testing.T, mod func(*config.LLM)) *fixture {
	t.Helper()
	f := &fixture{srv: llmtest.New(t), ledger: &bookLedger{caps: map[string]float64{}},
		clock: &clock{now: time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)}, reg: metrics.NewRegistry()}
	f.srv.RequireKey("sk-test")
	cfg := testConfig(f.srv.URL)
	if mod != nil {
		mod(&cfg)
	}
	var err error
	f.p, err = llm.New(cfg, llm.Options{Ledger: f.ledger, Metrics: f.reg, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var factSchema = func() *llm.Schema {
	s, err := llm.NewSchema("facts", "the durable facts of a conversation", map[string]any{
		"type": "object", "additionalProperties": false, "required": []any{"facts"},
		"properties": map[string]any{"facts": map[string]any{"type": "array", "items": map[string]any{
			"type": "object", "additionalProperties": false, "required": []any{"key", "value"},
			"properties": map[string]any{"key": map[string]any{"type": "string"}, "value": map[string]any{"type": "string"}},
		}}},
	})
	if err != nil {
		panic(err)
	}
	return s
}()

type facts struct {
	Facts []struct{ Key, Value string } `json:"facts"`
}

func extraction(ns string) llm.Request {
	return llm.Request{
		Bill:     llm.Bill{Org: "acme", Namespace: ns, Purpose: llm.PurposeExtraction},
		Messages: []llm.Message{{Role: llm.RoleSystem, Content: "extract durable facts"}, {Role: llm.RoleUser, Content: "I moved to Lisbon last week."}},
		Schema:   factSchema, MaxTokens: 500,
	}
}

func TestStructuredAnswerIsDecodedAndBilled(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.Reply(llmtest.JSON(map[string]any{"facts": []any{map[string]any{"key": "user.city", "value": "Lisbon"}}}).WithUsage(1000, 250))
	var out facts
	req := extraction("travel")
	req.ReasoningEffort = "low"
	ans, err := f.p.CompleteJSON(context.Background(), req, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Facts) != 1 || out.Facts[0].Key != "user.city" || out.Facts[0].Value != "Lisbon" {
		t.Fatalf("decoded %+v", out)
	}
	// 1000 tokens in at $1/M and 250 out at $2/M.
	if want := 0.0015; math.Abs(ans.Usage.CostUSD-want) > 1e-12 || ans.Usage.PromptTokens != 1000 || ans.Attempts != 1 {
		t.Fatalf("usage %+v attempts %d, want $%v over 1000+250 tokens in one attempt", ans.Usage, ans.Attempts, want)
	}
	sent := f.srv.Chats()[0]
	if sent.Model != "model-extract" || sent.SchemaName != "facts" || !sent.Strict || sent.MaxCompletionTokens != 500 || sent.ReasoningEffort != "low" ||
		len(sent.Messages) != 2 || sent.Messages[0].Role != "system" || !sent.Contains("Lisbon") {
		t.Fatalf("the provider sent %+v", sent)
	}
	charges := f.ledger.all()
	if len(charges) != 1 || charges[0].Org != "acme" || charges[0].Namespace != "travel" || charges[0].Purpose != llm.PurposeExtraction ||
		charges[0].Model != "model-extract" || charges[0].CompletionTokens != 250 || !charges[0].Day.Equal(time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("charges %+v", charges)
	}
}

func TestProviderErrorsAreClassedAsTheSeedsSay(t *testing.T) {
	for _, tc := range []struct {
		status   int
		class    error
		attempts int // requests the provider sent
	}{
		{401, llm.ErrStopped, 1}, {403, llm.ErrStopped, 1}, {404, llm.ErrStopped, 1},
		{400, llm.ErrRefused, 1}, {422, llm.ErrRefused, 1}, {413, llm.ErrRefused, 1},
		{408, llm.ErrTransient, 3}, {409, llm.ErrTransient, 3}, {429, llm.ErrTransient, 3},
		{500, llm.ErrTransient, 3}, {502, llm.ErrTransient, 3}, {503, llm.ErrTransient, 3},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			f := newFixture(t, nil)
			f.srv.Script(func(llmtest.ChatRequest) llmtest.Reply { return llmtest.Status(tc.status, "the provider says no") })
			_, err := f.p.Complete(context.Background(), extraction("ns"))
			if !errors.Is(err, tc.class) {
				t.Fatalf("HTTP %d: %v, want %v", tc.status, err, tc.class)
			}
			var e *llm.Error
			if !errors.As(err, &e) || e.Status != tc.status || e.Message != "the provider says no" || e.Purpose != llm.PurposeExtraction || e.Model != "model-extract" {
				t.Fatalf("HTTP %d: %#v", tc.status, e)
			}
			if n := len(f.srv.Chats()); n != tc.attempts {
				t.Fatalf("HTTP %d: %d requests sent, want %d", tc.status, n, tc.attempts)
			}
			if c := f.ledger.all(); len(c) != 0 {
				t.Fatalf("HTTP %d billed %+v: a refused or failed call is not paid", tc.status, c)
			}
		})
	}
}

func TestRateLimitedThenAnsweredLosesNothing(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.Reply(llmtest.Status(429, "Rate limit reached").WithRetryAfter(20*time.Millisecond),
		llmtest.JSON(map[string]any{"facts": []any{map[string]any{"key": "user.city", "value": "Lisbon"}}}))
	var out facts
	ans, err := f.p.CompleteJSON(context.Background(), extraction("ns"), &out)
	if err != nil {
		t.Fatal(err)
	}
	if ans.Attempts != 2 || len(out.Facts) != 1 || len(f.srv.Chats()) != 2 || len(f.ledger.all()) != 1 {
		t.Fatalf("attempts %d, facts %+v, %d requests, %d charges; want the retry's answer, billed once", ans.Attempts, out, len(f.srv.Chats()), len(f.ledger.all()))
	}
	if a, b := f.srv.Chats()[0].Text(), f.srv.Chats()[1].Text(); a != b {
		t.Fatalf("the retry sent %q, the first attempt %q", b, a)
	}
}

func TestALongRetryAfterIsLeftToTheCaller(t *testing.T) {
	for name, tc := range map[string]struct {
		retryAfter time.Duration
		deadline   time.Duration // 0: none
	}{
		"past the deadline":  {retryAfter: 15 * time.Second, deadline: 10 * time.Second},
		"longer than a call": {retryAfter: time.Hour},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.srv.Reply(llmtest.Status(503, "overloaded").WithRetryAfter(tc.retryAfter))
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			_, err := f.p.Complete(ctx, extraction("ns"))
			var e *llm.Error
			if !errors.As(err, &e) || e.Class != llm.ClassTransient || e.RetryAfter != tc.retryAfter || len(f.srv.Chats()) != 1 || ctx.Err() != nil {
				t.Fatalf("%v (%d requests): want the transient error at once, with the provider's Retry-After for the caller", err, len(f.srv.Chats()))
			}
		})
	}
}

func TestASlowProviderTimesOutTransiently(t *testing.T) {
	f := newFixture(t, func(c *config.LLM) { c.Timeout = 50 * time.Millisecond; c.MaxAttempts = 2 })
	f.srv.Script(func(llmtest.ChatRequest) llmtest.Reply {
		return llmtest.JSON(map[string]any{"facts": []any{}}).After(10 * time.Second)
	})
	_, err := f.p.Complete(context.Background(), extraction("ns"))
	if !errors.Is(err, llm.ErrTransient) || !strings.Contains(err.Error(), "no answer within 50ms") {
		t.Fatalf("%v, want a transient timeout", err)
	}
	if n := len(f.srv.Chats()); n != 2 {
		t.Fatalf("%d attempts, want 2 (LOOM_LLM_MAX_ATTEMPTS)", n)
	}

	// The caller's own deadline is the caller's, not the provider's failure.
	f = newFixture(t, nil)
	f.srv.Script(func(llmtest.ChatRequest) llmtest.Reply {
		return llmtest.JSON(map[string]any{"facts": []any{}}).After(10 * time.Second)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = f.p.Complete(ctx, extraction("ns"))
	if !errors.Is(err, context.DeadlineExceeded) || llm.ClassOf(err) != 0 {
		t.Fatalf("%v, want the caller's deadline", err)
	}
}

func TestAnUnreachableProviderIsTransient(t *testing.T) {
	f := newFixture(t, func(c *config.LLM) { c.BaseURL = "http://127.0.0.1:1"; c.MaxAttempts = 1 })
	if _, err := f.p.Complete(context.Background(), extraction("ns")); !errors.Is(err, llm.ErrTransient) {
		t.Fatalf("%v, want transient", err)
	}
}

func TestAWrongKeyStopsAtOnce(t *testing.T) {
	f := newFixture(t, func(c *config.LLM) { c.APIKey = "sk-wrong" })
	_, err := f.p.Complete(context.Background(), extraction("ns"))
	if !errors.Is(err, llm.ErrStopped) || len(f.srv.Chats()) != 1 {
		t.Fatalf("%v after %d requests, want stopped after one", err, len(f.srv.Chats()))
	}
}

func TestMalformedAnswersArePaidAndReported(t *testing.T) {
	for name, reply := range map[string]llmtest.Reply{
		"not JSON":        llmtest.Raw(`{"facts": [`),
		"schema broken":   llmtest.Raw(`{"facts": [{"key": "k"}]}`),
		"cut at the cap":  {Content: `{"facts": []}`, FinishReason: "length"},
		"model refused":   {Content: "", Unchecked: true, Refusal: "I can't help with that."},
		"empty structure": llmtest.Raw(``),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.srv.Reply(reply)
			var out facts
			ans, err := f.p.CompleteJSON(context.Background(), extraction("ns"), &out)
			if !errors.Is(err, llm.ErrMalformed) {
				t.Fatalf("%v, want malformed", err)
			}
			if len(f.ledger.all()) != 1 || ans.Usage.CompletionTokens == 0 && ans.Usage.PromptTokens == 0 || len(f.srv.Chats()) != 1 {
				t.Fatalf("usage %+v, %d charges, %d requests: a malformed answer is paid once and not asked again here", ans.Usage, len(f.ledger.all()), len(f.srv.Chats()))
			}
		})
	}
}

func TestStrictSchemasOnly(t *testing.T) {
	for name, doc := range map[string]map[string]any{
		"optional property": {"type": "object", "additionalProperties": false, "required": []any{"a"},
			"properties": map[string]any{"a": map[string]any{"type": "string"}, "b": map[string]any{"type": "string"}}},
		"open object": {"type": "object", "required": []any{"a"}, "properties": map[string]any{"a": map[string]any{"type": "string"}}},
		"open nested": {"type": "object", "additionalProperties": false, "required": []any{"a"},
			"properties": map[string]any{"a": map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{}}}}},
	} {
		if _, err := llm.NewSchema("s", "", doc); err == nil {
			t.Errorf("%s: NewSchema accepted a schema strict mode refuses", name)
		}
	}
	if _, err := llm.NewSchema("has space", "", map[string]any{"type": "string"}); err == nil {
		t.Error("NewSchema accepted a name OpenAI refuses")
	}
}

func TestTheCapRefusesOnceReachedAndResetsTheNextDay(t *testing.T) {
	f := newFixture(t, nil)
	f.ledger.caps["capped"] = 0.01
	// Each answer costs 2000 tokens in at $1/M and 1000 out at $2/M: $0.004.
	f.srv.Script(func(llmtest.ChatRequest) llmtest.Reply {
		return llmtest.JSON(map[string]any{"facts": []any{}}).WithUsage(2000, 1000)
	})
	ctx := context.Background()
	for i := 0; i < 3; i++ { // $0.004, $0.008, then $0.012: the third call passes the cap
		if _, err := f.p.Complete(ctx, extraction("capped")); err != nil {
			t.Fatalf("call %d under the cap: %v", i+1, err)
		}
	}
	_, err := f.p.Complete(ctx, extraction("capped"))
	var e *llm.Error
	if !errors.As(err, &e) || e.Class != llm.ClassCapped || e.CapUSD != 0.01 || math.Abs(e.SpentUSD-0.012) > 1e-9 {
		t.Fatalf("%v, want capped at $0.01 with $0.012 spent", err)
	}
	if want := time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC); !e.ResetsAt.Equal(want) || e.RetryAfter != want.Sub(f.clock.Now()) {
		t.Fatalf("resets at %v in %v, want %v", e.ResetsAt, e.RetryAfter, want)
	}
	if n := len(f.srv.Chats()); n != 3 {
		t.Fatalf("%d requests sent, want the capped call to send none", n)
	}
	// Another namespace has its own cap (the default, $1), and so has tomorrow.
	if _, err := f.p.Complete(ctx, extraction("other")); err != nil {
		t.Fatalf("another namespace: %v", err)
	}
	f.clock.Set(time.Date(2026, 3, 14, 23, 59, 59, 0, time.UTC))
	if _, err := f.p.Complete(ctx, extraction("capped")); !errors.Is(err, llm.ErrCapped) {
		t.Fatalf("a second before midnight: %v, want still capped", err)
	}
	f.clock.Set(time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC))
	if _, err := f.p.Complete(ctx, extraction("capped")); err != nil {
		t.Fatalf("the next day: %v, want the cap reset", err)
	}
}

func TestTheResolverSpendsOnlyItsShare(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.Script(func(llmtest.ChatRequest) llmtest.Reply {
		return llmtest.JSON(map[string]any{"facts": []any{}}).WithUsage(10000, 10000) // model-judge at the default price: $0.3
	})
	judge := extraction("ns")
	judge.Purpose = llm.PurposeConflictResolver
	ctx := context.Background()
	if _, err := f.p.Complete(ctx, judge); err != nil {
		t.Fatal(err)
	}
	// $0.30 spent is past the resolver's $0.25, but far under the requests' $1.
	if _, err := f.p.Complete(ctx, judge); !errors.Is(err, llm.ErrCapped) {
		t.Fatalf("the resolver past its share: %v, want capped", err)
	}
	for i := 0; i < 3; i++ {
		if _, err := f.p.Complete(ctx, extraction("ns")); err != nil {
			t.Fatalf("extraction %d with the resolver capped: %v", i+1, err)
		}
	}
	b, err := f.p.Allowance(ctx, llm.Bill{Org: "acme", Namespace: "ns", Purpose: llm.PurposeExtraction})
	if err != nil || b.Capped() {
		t.Fatalf("extraction's allowance %+v %v: under $1 it is open", b, err)
	}
}

func TestNotConfiguredNamesTheSettings(t *testing.T) {
	p, err := llm.New(config.LLM{Timeout: time.Second, Concurrency: 1, MaxAttempts: 1, RetryBase: time.Millisecond}, llm.Options{Ledger: &bookLedger{}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Complete(context.Background(), extraction("ns"))
	if !errors.Is(err, llm.ErrNotConfigured) || p.Configured() {
		t.Fatalf("%v, want not configured", err)
	}
	for _, s := range llm.SettingsToSet() {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not name %s", err, s)
		}
	}
	if _, err := p.Embed(context.Background(), llm.Bill{Org: "o", Namespace: "n"}, []string{"x"}); !errors.Is(err, llm.ErrNotConfigured) {
		t.Fatalf("Embed: %v, want not configured", err)
	}
}

func TestConcurrencyIsBoundedPerProcess(t *testing.T) {
	f := newFixture(t, func(c *config.LLM) { c.Concurrency = 2 })
	var inFlight, most atomic.Int32
	f.srv.Script(func(llmtest.ChatRequest) llmtest.Reply {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		return llmtest.JSON(map[string]any{"facts": []any{}})
	})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.p.Complete(context.Background(), extraction("ns")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if most.Load() > 2 {
		t.Fatalf("%d calls in flight at once, want at most LOOM_LLM_CONCURRENCY=2", most.Load())
	}
}

func TestEmbedReturnsVectorsInOrderAndBillsThem(t *testing.T) {
	f := newFixture(t, nil)
	out, err := f.p.Embed(context.Background(), llm.Bill{Org: "acme", Namespace: "ns"}, []string{"a lisbon flat", "a lisbon flat", "tea"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Vectors) != 3 || len(out.Vectors[0]) != 16 || fmt.Sprint(out.Vectors[0]) != fmt.Sprint(out.Vectors[1]) || fmt.Sprint(out.Vectors[0]) == fmt.Sprint(out.Vectors[2]) {
		t.Fatalf("vectors %v", out.Vectors)
	}
	c := f.ledger.all()
	if len(c) != 1 || c[0].Purpose != llm.PurposeEmbedding || c[0].Model != "embed-small" || c[0].PromptTokens == 0 || c[0].CostUSD <= 0 {
		t.Fatalf("charges %+v", c)
	}
	if r := f.srv.Requests(); len(r) != 1 || r[0].Embed == nil || r[0].Embed.Model != "embed-small" {
		t.Fatalf("requests %+v", r)
	}
}

func TestMetricsShowSpendWithoutTenantLabels(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.Reply(llmtest.JSON(map[string]any{"facts": []any{}}).WithUsage(1000, 500), llmtest.Status(429, "slow down"))
	ctx := context.Background()
	if _, err := f.p.Complete(ctx, extraction("ns-a")); err != nil {
		t.Fatal(err)
	}
	other := extraction("ns-b")
	other.Model = "some-model-nobody-configured"
	f.srv.Reply(llmtest.JSON(map[string]any{"facts": []any{}}))
	if _, err := f.p.Complete(ctx, other); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := f.reg.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{
		`loom_llm_cost_usd_total{model="model-extract",purpose="extraction"} 0.002`,
		`loom_llm_tokens_total{kind="prompt",model="model-extract",purpose="extraction"} 1000`,
		`loom_llm_attempts_total{model="other",outcome="transient",purpose="extraction"} 1`,
		`loom_llm_attempts_total{model="other",outcome="ok",purpose="extraction"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, "ns-a") || strings.Contains(text, "acme") || strings.Contains(text, "nobody-configured") {
		t.Errorf("/metrics carries a tenant's or a caller's name:\n%s", text)
	}
}

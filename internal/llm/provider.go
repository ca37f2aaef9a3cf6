// Package llm is Loom's model provider: chat completions with structured (JSON
// Schema) answers and embeddings, through the official openai-go client, against any
// OpenAI-compatible API (OpenAI, Azure OpenAI, a local Ollama or vLLM). Every call
// bills one org's namespace: its tokens and cost go to a Ledger, and a namespace
// that has spent its daily cost cap gets no call until the day (UTC) ends. Failures
// come back as *Error in the seeds' classes: stopped (401/403/404), transient
// (408/409/429/5xx, timeouts; retried here with backoff first), refused (other 4xx),
// malformed answers, capped, and not configured.
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/metrics"
)

// Purpose is what a call is for: it picks the model and, for the conflict resolver,
// the share of the cap it may spend.
type Purpose string

const (
	PurposeExtraction       Purpose = "extraction"        // memory.set_from_messages
	PurposeConflictResolver Purpose = "conflict_resolver" // the conflict resolver
	PurposeAsk              Purpose = "ask"               // memory.ask
	PurposeEntityExtraction Purpose = "entity_extraction" // the entity extractor
	PurposeEmbedding        Purpose = "embedding"         // Provider.Embed
	PurposeRerank           Purpose = "rerank"            // memory.search's reranker (LOOM_SEARCH_RERANKER=llm)
	PurposeHyDE             Purpose = "hyde"              // memory.search's hypothetical answer (LOOM_SEARCH_HYDE)
)

// The purposes of issue 32's passes and operations.
const (
	PurposeStructuredProfile Purpose = "structured_profile" // the structured_profile pass
	PurposeConsolidation     Purpose = "consolidation"      // memory.consolidate's summaries
	PurposeSessionDigest     Purpose = "session_digest"     // the session_digest pass
	// PurposeProfileConsolidation is the profile_consolidation pass's sections.
	PurposeProfileConsolidation Purpose = "profile_consolidation"
	// PurposeReflectionDistill is the reflection_distill pass's labels and reflections.
	PurposeReflectionDistill Purpose = "reflection_distill"
)

func purposes() []Purpose {
	return []Purpose{PurposeExtraction, PurposeConflictResolver, PurposeAsk, PurposeEntityExtraction, PurposeEmbedding, PurposeRerank, PurposeHyDE,
		PurposeStructuredProfile, PurposeConsolidation, PurposeSessionDigest, PurposeProfileConsolidation,
		PurposeReflectionDistill}
}

// Bill names who pays for a call.
type Bill struct {
	Org, Namespace string
	Purpose        Purpose
}

func (b Bill) check() error {
	if b.Org == "" || b.Namespace == "" {
		return fmt.Errorf("llm: a call bills an org and a namespace (got %q, %q)", b.Org, b.Namespace)
	}
	for _, p := range purposes() {
		if b.Purpose == p {
			return nil
		}
	}
	return fmt.Errorf("llm: unknown purpose %q", b.Purpose)
}

// Role is a chat message's author.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Message is one chat message.
type Message struct {
	Role    Role
	Content string
}

// Request is one chat completion.
type Request struct {
	Bill
	// Model overrides the purpose's model ("" = the purpose's).
	Model    string
	Messages []Message
	// Schema, when set, is the shape the answer must have.
	Schema *Schema
	// MaxTokens caps the answer (0: the provider's default). An answer cut there is
	// malformed when a schema is set.
	MaxTokens int
	// ReasoningEffort overrides LOOM_LLM_OPENAI_REASONING_EFFORT ("" = that).
	ReasoningEffort string
	Temperature     *float64
}

// Usage is what a call consumed and cost.
type Usage struct {
	PromptTokens, CompletionTokens int64
	CostUSD                        float64
}

// Answer is a chat completion's answer.
type Answer struct {
	// Content is the answer's text: JSON matching the request's schema when it had one.
	Content      string
	Model        string // the model that answered, as the provider names it
	FinishReason string
	Usage        Usage
	Attempts     int
}

// Options are a provider's collaborators.
type Options struct {
	Ledger  Ledger            // required: where spend is kept and read
	Metrics *metrics.Registry // nil: a private registry
	Log     *slog.Logger      // nil: discarded
	// Now is the clock the day boundary is read from (nil: time.Now).
	Now        func() time.Time
	HTTPClient *http.Client
}

// Provider makes the model calls of one process.
type Provider struct {
	cfg    config.LLM
	client *Client // nil when no provider is configured
	ledger Ledger
	now    func() time.Time
	log    *slog.Logger
	slots  chan struct{}
	m      providerMetrics
	known  map[string]bool
}

// New builds the provider cfg describes. Without a base URL it is built all the
// same, and every call answers ErrNotConfigured.
func New(cfg config.LLM, opts Options) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Ledger == nil {
		return nil, errors.New("llm: a spend ledger is required")
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewRegistry()
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p := &Provider{cfg: cfg, ledger: opts.Ledger, now: opts.Now, log: opts.Log,
		slots: make(chan struct{}, cfg.Concurrency), m: newProviderMetrics(opts.Metrics), known: map[string]bool{}}
	for m := range cfg.Prices {
		p.known[m] = true
	}
	for _, pu := range purposes() {
		if m := p.Model(pu); m != "" {
			p.known[m] = true
		}
	}
	if !cfg.Configured() {
		opts.Log.Info("no model provider configured: extraction, memory.ask and the conflict resolver make no call (set LOOM_LLM_BASE_URL and LOOM_LLM_MODEL)")
		return p, nil
	}
	var err error
	p.client, err = NewClient(Endpoint{BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, Timeout: cfg.Timeout, HTTPClient: opts.HTTPClient})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Configured reports whether calls reach a provider.
func (p *Provider) Configured() bool { return p.client != nil }

// Check reports whether a call billed to bill could be sent now: the not-configured
// or capped error it would answer, else nil. A request that makes several calls checks
// first, so it does no work for a call that cannot be made.
func (p *Provider) Check(ctx context.Context, bill Bill) error {
	_, err := p.admit(ctx, bill, "")
	return err
}

// Model is the model a purpose asks.
func (p *Provider) Model(purpose Purpose) string {
	own := map[Purpose]string{
		PurposeExtraction:       p.cfg.ExtractionModel,
		PurposeConflictResolver: p.cfg.ConflictResolverModel,
		PurposeAsk:              p.cfg.AskModel,
		PurposeEntityExtraction: p.cfg.EntityExtractorModel,
		PurposeEmbedding:        p.cfg.EmbeddingModel,
	}[purpose]
	if own != "" {
		return own
	}
	return p.cfg.Model
}

// Complete asks for one chat completion, billed to req.Bill. With a schema, an
// answer that does not match it (or was cut at MaxTokens, or refused) is an
// ErrMalformed error, returned with the Answer that was paid for.
func (p *Provider) Complete(ctx context.Context, req Request) (Answer, error) {
	if len(req.Messages) == 0 {
		return Answer{}, errors.New("llm: a chat completion needs a message")
	}
	model, err := p.admit(ctx, req.Bill, req.Model)
	if err != nil {
		return Answer{}, err
	}
	params := p.chatParams(req, model)
	var cc *openai.ChatCompletion
	attempts, err := p.withRetries(ctx, req.Purpose, model, func(ctx context.Context) (err error) {
		cc, err = p.client.Chat(ctx, params)
		return err
	})
	if err != nil {
		return Answer{Attempts: attempts}, annotate(err, req.Purpose, model)
	}
	ans := Answer{Model: cc.Model, Attempts: attempts,
		Usage: p.charge(ctx, req.Bill, model, cc.Usage.PromptTokens, cc.Usage.CompletionTokens)}
	if len(cc.Choices) == 0 {
		return ans, annotate(&Error{Class: ClassMalformed, Message: "the answer has no choice"}, req.Purpose, model)
	}
	choice := cc.Choices[0]
	ans.Content, ans.FinishReason = choice.Message.Content, choice.FinishReason
	if choice.Message.Refusal != "" {
		return ans, annotate(&Error{Class: ClassMalformed, Message: "the model refused: " + choice.Message.Refusal}, req.Purpose, model)
	}
	if req.Schema != nil {
		if choice.FinishReason == "length" {
			return ans, annotate(&Error{Class: ClassMalformed, Message: "the answer was cut at the output cap"}, req.Purpose, model)
		}
		if err := req.Schema.Validate(ans.Content); err != nil {
			return ans, annotate(&Error{Class: ClassMalformed, Message: "the answer does not match schema " + req.Schema.Name(), Cause: err}, req.Purpose, model)
		}
	}
	return ans, nil
}

// CompleteJSON is Complete with a schema, decoding the answer into out.
func (p *Provider) CompleteJSON(ctx context.Context, req Request, out any) (Answer, error) {
	if req.Schema == nil {
		return Answer{}, errors.New("llm: CompleteJSON needs a schema")
	}
	ans, err := p.Complete(ctx, req)
	if err != nil {
		return ans, err
	}
	if err := json.Unmarshal([]byte(ans.Content), out); err != nil {
		return ans, annotate(&Error{Class: ClassMalformed, Message: "the answer does not decode", Cause: err}, req.Purpose, ans.Model)
	}
	return ans, nil
}

// Embeddings are one Embed call's vectors, in input order, as the provider sent them.
type Embeddings struct {
	Vectors  [][]float32
	Model    string
	Usage    Usage
	Attempts int
}

// Embed embeds texts with LOOM_LLM_EMBEDDING_MODEL, billed to bill (its purpose is
// PurposeEmbedding whatever bill says).
func (p *Provider) Embed(ctx context.Context, bill Bill, texts []string) (Embeddings, error) {
	bill.Purpose = PurposeEmbedding
	model, err := p.admit(ctx, bill, "")
	if err != nil || len(texts) == 0 {
		return Embeddings{}, err
	}
	params := openai.EmbeddingNewParams{Model: model, Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}}
	var res *EmbeddingList
	attempts, err := p.withRetries(ctx, bill.Purpose, model, func(ctx context.Context) (err error) {
		res, err = p.client.Embeddings(ctx, params)
		return err
	})
	if err != nil {
		return Embeddings{Attempts: attempts}, annotate(err, bill.Purpose, model)
	}
	out := Embeddings{Model: res.Model, Attempts: attempts, Usage: p.charge(ctx, bill, model, res.Usage.PromptTokens, 0)}
	if out.Vectors, err = Vectors(res.Data, len(texts)); err != nil {
		return out, annotate(&Error{Class: ClassMalformed, Message: err.Error()}, bill.Purpose, model)
	}
	return out, nil
}

// Vectors puts an embeddings answer in input order (data[i].index, not the position
// in data, says which input a vector belongs to), checking that each of the n
// inputs has one non-empty vector.
func Vectors(data []Embedding, n int) ([][]float32, error) {
	if len(data) != n {
		return nil, fmt.Errorf("response has %d embeddings for %d inputs", len(data), n)
	}
	out := make([][]float32, n)
	for _, d := range data {
		switch {
		case d.Index < 0 || d.Index >= int64(n):
			return nil, fmt.Errorf("response has embedding index %d for %d inputs", d.Index, n)
		case out[d.Index] != nil:
			return nil, fmt.Errorf("response has embedding index %d twice", d.Index)
		case len(d.Embedding) == 0:
			return nil, fmt.Errorf("response has an empty embedding at index %d", d.Index)
		}
		out[d.Index] = d.Embedding
	}
	return out, nil
}

// admit checks what every call needs before it is sent: a provider, a valid bill
// and a namespace under its cap. It answers the model to ask.
func (p *Provider) admit(ctx context.Context, bill Bill, model string) (string, error) {
	if err := bill.check(); err != nil {
		return "", err
	}
	if p.client == nil {
		p.m.refused.With(string(bill.Purpose), ClassNotConfigured.String()).Inc()
		return "", notConfigured(bill.Purpose)
	}
	if model == "" {
		model = p.Model(bill.Purpose)
	}
	b, err := p.Allowance(ctx, bill)
	if err != nil {
		return "", err
	}
	if b.Capped() {
		p.m.refused.With(string(bill.Purpose), ClassCapped.String()).Inc()
		return "", b.capped(bill, model, p.now())
	}
	return model, nil
}

func (p *Provider) chatParams(req Request, model string) openai.ChatCompletionNewParams {
	params := openai.ChatCompletionNewParams{Model: model}
	for _, m := range req.Messages {
		switch m.Role {
		case RoleSystem:
			params.Messages = append(params.Messages, openai.SystemMessage(m.Content))
		case RoleAssistant:
			params.Messages = append(params.Messages, openai.AssistantMessage(m.Content))
		default:
			params.Messages = append(params.Messages, openai.UserMessage(m.Content))
		}
	}
	if s := req.Schema; s != nil {
		js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: s.name, Schema: s.doc, Strict: openai.Bool(true)}
		if s.description != "" {
			js.Description = openai.String(s.description)
		}
		params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}}
	}
	if req.MaxTokens > 0 {
		params.MaxCompletionTokens = openai.Int(int64(req.MaxTokens))
	}
	effort := req.ReasoningEffort
	if effort == "" {
		effort = p.cfg.ReasoningEffort
	}
	if effort != "" {
		params.ReasoningEffort = shared.ReasoningEffort(effort)
	}
	if req.Temperature != nil {
		params.Temperature = openai.Float(*req.Temperature)
	}
	return params
}

// maxRetryWait is the longest wait a call sits out itself; a provider asking for a
// longer one gets its transient error back to the caller at once, Retry-After and all.
const maxRetryWait = 30 * time.Second

// withRetries runs one call, retrying a transient failure with exponential backoff
// (at least the provider's Retry-After) up to LOOM_LLM_MAX_ATTEMPTS, while the
// caller's deadline leaves room for the wait and the wait is under maxRetryWait. Each attempt holds one of the
// process's LOOM_LLM_CONCURRENCY slots; a wait holds none.
func (p *Provider) withRetries(ctx context.Context, purpose Purpose, model string, call func(context.Context) error) (int, error) {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = p.cfg.RetryBase
	bo.MaxInterval = 10 * time.Second
	bo.MaxElapsedTime = 0
	bo.Reset()
	for attempt := 1; ; attempt++ {
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return attempt - 1, fmt.Errorf("model call: waiting for a free slot: %w", ctx.Err())
		}
		p.m.inFlight.Add(1)
		start := time.Now()
		err := call(ctx)
		p.m.inFlight.Add(-1)
		<-p.slots
		p.m.seconds.With(string(purpose)).ObserveSince(start)
		outcome := "ok"
		if c := ClassOf(err); c != 0 {
			outcome = c.String()
		} else if err != nil {
			outcome = "cancelled"
		}
		p.m.attempts.With(string(purpose), p.modelLabel(model), outcome).Inc()
		var e *Error
		if err == nil || !errors.As(err, &e) || e.Class != ClassTransient || attempt >= p.cfg.MaxAttempts {
			return attempt, err
		}
		wait := max(bo.NextBackOff(), e.RetryAfter)
		if dl, ok := ctx.Deadline(); (ok && time.Until(dl) < wait) || wait > maxRetryWait {
			return attempt, err
		}
		p.log.Debug("model call failed transiently; retrying", "purpose", purpose, "model", model, "attempt", attempt, "retry_in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return attempt, err
		case <-t.C:
		}
	}
}

// charge prices a call's usage and books it. A ledger that cannot take it now keeps
// it for later (see Ledger); the call's answer is never lost over its bill.
func (p *Provider) charge(ctx context.Context, bill Bill, model string, prompt, completion int64) Usage {
	u := Usage{PromptTokens: prompt, CompletionTokens: completion, CostUSD: p.price(model).cost(prompt, completion)}
	label := p.modelLabel(model)
	p.m.tokens.With(string(bill.Purpose), label, "prompt").Add(float64(prompt))
	p.m.tokens.With(string(bill.Purpose), label, "completion").Add(float64(completion))
	p.m.cost.With(string(bill.Purpose), label).Add(u.CostUSD)
	c := Charge{Bill: bill, Day: utcDay(p.now()), Model: model, PromptTokens: prompt, CompletionTokens: completion, CostUSD: u.CostUSD}
	if err := p.ledger.Charge(context.WithoutCancel(ctx), c); err != nil {
		p.log.Warn("model call: the spend ledger did not take the charge; it is kept for the next write", "org", bill.Org,
			"namespace", bill.Namespace, "cost_usd", u.CostUSD, "err", err)
	}
	return u
}

// modelLabel bounds the model label to the models the settings name.
func (p *Provider) modelLabel(model string) string {
	if p.known[model] {
		return model
	}
	return "other"
}

func annotate(err error, purpose Purpose, model string) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	c := *e
	c.Purpose, c.Model = purpose, model
	return &c
}

package config

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// LLM configures the model provider: the OpenAI-compatible endpoint extraction, the
// conflict resolver, memory.ask and entity extraction call, what each purpose asks
// for, and what a namespace may spend on it a day.
type LLM struct {
	BaseURL string // LOOM_LLM_BASE_URL: "" = no provider (model-backed routes answer 503)
	APIKey  string // LOOM_LLM_API_KEY
	Model   string // LOOM_LLM_MODEL: every purpose's model unless its own is set

	ExtractionModel       string // LOOM_EXTRACTION_MODEL
	ConflictResolverModel string // LOOM_CONFLICT_RESOLVER_MODEL
	AskModel              string // LOOM_ASK_MODEL
	EntityExtractorModel  string // LOOM_ENTITY_EXTRACTOR_MODEL
	EmbeddingModel        string // LOOM_LLM_EMBEDDING_MODEL: the provider's billed embeddings
	ReasoningEffort       string // LOOM_LLM_OPENAI_REASONING_EFFORT: "" = not sent

	Timeout     time.Duration // LOOM_LLM_TIMEOUT_MS: one attempt's wait for an answer
	Concurrency int           // LOOM_LLM_CONCURRENCY: calls in flight per process
	MaxAttempts int           // LOOM_LLM_MAX_ATTEMPTS: tries of a call that fails transiently
	RetryBase   time.Duration // LOOM_LLM_RETRY_BASE_MS: the first backoff, doubled per retry

	Prices       map[string]Price // LOOM_LLM_PRICES: model=input/output USD per million tokens
	DefaultPrice Price            // LOOM_LLM_DEFAULT_PRICE: a model the table does not name

	DailyCostCapUSD  float64 // LOOM_DEFAULT_DAILY_COST_CAP_USD: a namespace without daily_cost_cap_usd
	ResolverCapShare float64 // LOOM_MEMORY_CONFLICT_RESOLVER_CAP_SHARE: the resolver's part of the cap
}

// Price is what a model costs, in USD per million tokens.
type Price struct {
	InputPerMTok, OutputPerMTok float64
}

// defaultLLMPrices are list prices in USD per million tokens (input/output) when this
// was written; an operator sets the whole table anew with LOOM_LLM_PRICES.
const defaultLLMPrices = "gpt-4o=2.5/10,gpt-4o-mini=0.15/0.6,gpt-4.1=2/8,gpt-4.1-mini=0.4/1.6,gpt-4.1-nano=0.1/0.4," +
	"text-embedding-3-small=0.02/0,text-embedding-3-large=0.13/0"

// defaultLLMPrice prices a model the table does not name high rather than free, so an
// unknown model still meets the cap; set it to 0/0 for a local model.
const defaultLLMPrice = "2.5/10"

// Configured reports whether a provider is set.
func (c LLM) Configured() bool { return c.BaseURL != "" }

// Validate checks the section on its own.
func (c LLM) Validate() error {
	var errs []error
	if c.BaseURL == "" {
		if c.APIKey != "" || c.Model != "" {
			errs = append(errs, errors.New("LOOM_LLM_BASE_URL: required with LOOM_LLM_API_KEY or LOOM_LLM_MODEL (https://api.openai.com/v1 for OpenAI, http://localhost:11434/v1 for a local Ollama)"))
		}
	} else {
		if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("LOOM_LLM_BASE_URL: %q is not an http:// or https:// URL", c.BaseURL))
		}
		if c.Model == "" {
			errs = append(errs, errors.New("LOOM_LLM_MODEL: required with LOOM_LLM_BASE_URL (the model every purpose asks unless its own is set)"))
		}
	}
	switch c.ReasoningEffort {
	case "", "minimal", "low", "medium", "high":
	default:
		errs = append(errs, fmt.Errorf("LOOM_LLM_OPENAI_REASONING_EFFORT: unknown effort %q (minimal, low, medium, high)", c.ReasoningEffort))
	}
	if c.Timeout <= 0 || c.Concurrency < 1 || c.MaxAttempts < 1 || c.RetryBase <= 0 {
		errs = append(errs, errors.New("LOOM_LLM_TIMEOUT_MS, LOOM_LLM_CONCURRENCY, LOOM_LLM_MAX_ATTEMPTS and LOOM_LLM_RETRY_BASE_MS must be positive"))
	}
	if c.DailyCostCapUSD < 0 {
		errs = append(errs, errors.New("LOOM_DEFAULT_DAILY_COST_CAP_USD must not be negative"))
	}
	if c.ResolverCapShare < 0 || c.ResolverCapShare > 1 {
		errs = append(errs, errors.New("LOOM_MEMORY_CONFLICT_RESOLVER_CAP_SHARE must be in [0, 1]"))
	}
	return errors.Join(errs...)
}

// parsePrice reads "input/output" (USD per million tokens).
func parsePrice(s string) (Price, error) {
	in, out, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Price{}, fmt.Errorf("%q is not input/output", s)
	}
	i, err1 := strconv.ParseFloat(strings.TrimSpace(in), 64)
	o, err2 := strconv.ParseFloat(strings.TrimSpace(out), 64)
	if err1 != nil || err2 != nil || i < 0 || o < 0 {
		return Price{}, fmt.Errorf("%q is not two non-negative numbers input/output", s)
	}
	return Price{InputPerMTok: i, OutputPerMTok: o}, nil
}

func (r *reader) price(name, def string) Price {
	p, err := parsePrice(r.str(name, def))
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: %w", name, err))
	}
	return p
}

// prices reads a comma-separated list of model=input/output.
func (r *reader) prices(name, def string) map[string]Price {
	out := map[string]Price{}
	for _, entry := range r.list(name, def) {
		model, price, ok := strings.Cut(entry, "=")
		p, err := parsePrice(price)
		if model = strings.TrimSpace(model); !ok || model == "" || err != nil {
			r.errs = append(r.errs, fmt.Errorf("%s: entry %q is not model=input/output (USD per million tokens)", name, entry))
			continue
		}
		out[model] = p
	}
	return out
}

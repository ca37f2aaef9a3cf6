package llm

import "github.com/loomplane/loom/internal/metrics"

// providerMetrics are labelled by purpose, model and outcome only: the models are
// the ones the settings name (any other is "other"), so the series stay few however
// many orgs and namespaces call. Spend per namespace is the ledger's (Postgres).
type providerMetrics struct {
	attempts *metrics.CounterVec   // purpose, model, outcome
	refused  *metrics.CounterVec   // purpose, reason: calls not sent (capped, not_configured)
	tokens   *metrics.CounterVec   // purpose, model, kind (prompt, completion)
	cost     *metrics.CounterVec   // purpose, model
	seconds  *metrics.HistogramVec // purpose
	inFlight *metrics.Gauge
}

func newProviderMetrics(reg *metrics.Registry) providerMetrics {
	return providerMetrics{
		attempts: reg.Counter("loom_llm_attempts_total", "Model call attempts by purpose, model and outcome (ok, transient, stopped, refused, malformed, cancelled).", "purpose", "model", "outcome"),
		refused:  reg.Counter("loom_llm_calls_refused_total", "Model calls not sent, by purpose and reason (capped: the namespace's daily cost cap; not_configured).", "purpose", "reason"),
		tokens:   reg.Counter("loom_llm_tokens_total", "Tokens the provider counted, by purpose, model and kind (prompt, completion).", "purpose", "model", "kind"),
		cost:     reg.Counter("loom_llm_cost_usd_total", "What model calls cost in USD at the configured prices, by purpose and model.", "purpose", "model"),
		seconds:  reg.Histogram("loom_llm_attempt_seconds", "One model call attempt's time, by purpose.", []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}, "purpose"),
		inFlight: reg.Gauge("loom_llm_in_flight", "Model call attempts in flight in this process.").With(),
	}
}

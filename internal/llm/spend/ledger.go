// Package spend keeps what model calls cost in Postgres (loom.llm_spend, one row per
// org, namespace, UTC day, purpose and model), so every process reads the same
// spend against the daily cost cap. It is the table's only owner.
package spend

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/llm"
)

// writeTimeout bounds one charge's write: the call it bills has already been paid.
const writeTimeout = 5 * time.Second

// Ledger is llm.Ledger over Postgres.
type Ledger struct {
	pool *pgxpool.Pool

	mu sync.Mutex
	// pending holds charges Postgres did not take, merged by row, until a later write
	// stores them; Spent counts them meanwhile, so the cap still holds in this process.
	pending map[rowKey]*row
}

type rowKey struct {
	org, namespace string
	day            time.Time
	purpose        llm.Purpose
	model          string
}

type row struct {
	calls, prompt, completion int64
	costUSD                   float64
}

// NewLedger keeps spend in pool's database.
func NewLedger(pool *pgxpool.Pool) *Ledger {
	return &Ledger{pool: pool, pending: map[rowKey]*row{}}
}

// Charge adds one call's bill to its day. A charge Postgres does not take is kept
// and written with the next one.
func (l *Ledger) Charge(ctx context.Context, c llm.Charge) error {
	l.keep(c)
	return l.flush(ctx)
}

// Spent reads a namespace's spend on day, in all and on purpose, with the cap its
// config sets (daily_cost_cap_usd in loom.namespaces' config, written by the
// namespace's PUT).
func (l *Ledger) Spent(ctx context.Context, org, namespace string, day time.Time, purpose llm.Purpose) (llm.Spent, error) {
	// A failed flush leaves the charges pending, where they are counted below.
	_ = l.flush(ctx)
	var s llm.Spent
	err := l.pool.QueryRow(ctx, `SELECT
		(SELECT coalesce(sum(cost_usd), 0)::float8 FROM loom.llm_spend WHERE org = $1 AND namespace = $2 AND day = $3),
		(SELECT coalesce(sum(cost_usd), 0)::float8 FROM loom.llm_spend WHERE org = $1 AND namespace = $2 AND day = $3 AND purpose = $4),
		(SELECT CASE WHEN jsonb_typeof(config -> 'daily_cost_cap_usd') = 'number' THEN (config ->> 'daily_cost_cap_usd')::float8 END
		   FROM loom.namespaces WHERE org = $1 AND namespace = $2),
		EXISTS (SELECT 1 FROM loom.model_call_holds WHERE org = $1)`,
		org, namespace, day, string(purpose)).Scan(&s.TotalUSD, &s.PurposeUSD, &s.NamespaceCapUSD, &s.OrgHeld)
	if err != nil {
		return llm.Spent{}, fmt.Errorf("read loom.llm_spend: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, r := range l.pending {
		if k.org == org && k.namespace == namespace && k.day.Equal(day) {
			s.TotalUSD += r.costUSD
			if k.purpose == purpose {
				s.PurposeUSD += r.costUSD
			}
		}
	}
	return s, nil
}

func (l *Ledger) keep(c llm.Charge) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := rowKey{org: c.Org, namespace: c.Namespace, day: c.Day.UTC(), purpose: c.Purpose, model: c.Model}
	r := l.pending[k]
	if r == nil {
		r = &row{}
		l.pending[k] = r
	}
	r.calls++
	r.prompt += c.PromptTokens
	r.completion += c.CompletionTokens
	r.costUSD += c.CostUSD
}

// flush writes the pending rows, each added to its stored row; a row written is no
// longer pending, a row that fails stays.
func (l *Ledger) flush(ctx context.Context) error {
	l.mu.Lock()
	batch := l.pending
	l.pending = map[rowKey]*row{}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	var first error
	for k, r := range batch {
		_, err := l.pool.Exec(ctx, `INSERT INTO loom.llm_spend AS s
			(org, namespace, day, purpose, model, calls, prompt_tokens, completion_tokens, cost_usd)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (org, namespace, day, purpose, model) DO UPDATE SET
				calls = s.calls + excluded.calls, prompt_tokens = s.prompt_tokens + excluded.prompt_tokens,
				completion_tokens = s.completion_tokens + excluded.completion_tokens,
				cost_usd = s.cost_usd + excluded.cost_usd, updated_at = now()`,
			k.org, k.namespace, k.day, string(k.purpose), k.model, r.calls, r.prompt, r.completion, r.costUSD)
		if err != nil {
			l.restore(k, r)
			if first == nil {
				first = fmt.Errorf("write loom.llm_spend: %w", err)
			}
		}
	}
	return first
}

func (l *Ledger) restore(k rowKey, r *row) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.pending[k]; p != nil {
		p.calls += r.calls
		p.prompt += r.prompt
		p.completion += r.completion
		p.costUSD += r.costUSD
		return
	}
	l.pending[k] = r
}

// Day is one namespace's spend on one day, per purpose and model.
type Day struct {
	Purpose                   llm.Purpose
	Model                     string
	Calls, Prompt, Completion int64
	CostUSD                   float64
}

// Read lists a namespace's spend on day, per purpose and model, as stored.
func (l *Ledger) Read(ctx context.Context, org, namespace string, day time.Time) ([]Day, error) {
	rows, err := l.pool.Query(ctx, `SELECT purpose, model, calls, prompt_tokens, completion_tokens, cost_usd::float8
		FROM loom.llm_spend WHERE org = $1 AND namespace = $2 AND day = $3 ORDER BY purpose, model`, org, namespace, day)
	if err != nil {
		return nil, fmt.Errorf("read loom.llm_spend: %w", err)
	}
	defer rows.Close()
	var out []Day
	for rows.Next() {
		var d Day
		var purpose string
		if err := rows.Scan(&purpose, &d.Model, &d.Calls, &d.Prompt, &d.Completion, &d.CostUSD); err != nil {
			return nil, fmt.Errorf("read loom.llm_spend: %w", err)
		}
		d.Purpose = llm.Purpose(purpose)
		out = append(out, d)
	}
	return out, rows.Err()
}

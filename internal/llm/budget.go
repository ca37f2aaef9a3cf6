package llm

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/loomplane/loom/internal/config"
)

// Charge is one call's bill.
type Charge struct {
	Bill
	Day                            time.Time // the UTC day it is counted in (midnight)
	Model                          string
	PromptTokens, CompletionTokens int64
	CostUSD                        float64
}

// Spent is what a namespace spent on model calls in one day.
type Spent struct {
	TotalUSD   float64 // every purpose
	PurposeUSD float64 // the purpose asked about
	// NamespaceCapUSD is the namespace's own daily_cost_cap_usd (nil: none set).
	NamespaceCapUSD *float64
	// OrgHeld: the org's model calls are held (PUT /v1/orgs/self/model-calls): no call
	// is made until the hold is released, and what waits for one is held, not failed.
	OrgHeld bool
}

// HoldRecheck is how soon a caller held by its org's switch asks again: the hold has
// no end time, so the wait is short and the release is seen within it.
const HoldRecheck = 15 * time.Second

// Ledger keeps what each namespace spends a day. It is shared by every process, so
// the cap holds across them; a call in flight is counted when it ends, so the cap is
// passed by at most the calls already in flight.
type Ledger interface {
	Spent(ctx context.Context, org, namespace string, day time.Time, purpose Purpose) (Spent, error)
	// Charge adds one call's bill. A charge it cannot store now it keeps, and counts
	// in Spent, until a later write stores it.
	Charge(ctx context.Context, c Charge) error
}

// Budget is a namespace's allowance for one purpose today.
type Budget struct {
	CapUSD, SpentUSD float64
	// The purpose's own part: the resolver's share of the cap over its own calls;
	// for any other purpose the whole cap over the whole spend.
	PurposeCapUSD, PurposeSpentUSD float64
	ResetsAt                       time.Time
	// Held: the org's model calls are held; ResetsAt is then when to look again.
	Held bool
}

// Capped reports whether no call may be made: the cap is spent, or the org's calls are
// held.
func (b Budget) Capped() bool {
	return b.Held || b.SpentUSD >= b.CapUSD || b.PurposeSpentUSD >= b.PurposeCapUSD
}

func (b Budget) capped(bill Bill, model string, now time.Time) *Error {
	if b.Held {
		return &Error{Class: ClassCapped, Held: true, Purpose: bill.Purpose, Model: model, ResetsAt: b.ResetsAt, RetryAfter: b.ResetsAt.Sub(now),
			Message: "the org's model calls are held (PUT /v1/orgs/self/model-calls); the call waits until they are released"}
	}
	capUSD, spent := b.CapUSD, b.SpentUSD
	what := "the namespace's daily cost cap"
	if b.SpentUSD < b.CapUSD {
		capUSD, spent = b.PurposeCapUSD, b.PurposeSpentUSD
		what = fmt.Sprintf("the %s's share of the namespace's daily cost cap", bill.Purpose)
	}
	return &Error{Class: ClassCapped, Purpose: bill.Purpose, Model: model, CapUSD: capUSD, SpentUSD: spent, ResetsAt: b.ResetsAt,
		RetryAfter: b.ResetsAt.Sub(now),
		Message: fmt.Sprintf("namespace %s has spent $%.4f of %s ($%.4f) today; it resets at %s",
			bill.Namespace, spent, what, capUSD, b.ResetsAt.Format(time.RFC3339))}
}

// Allowance reads a namespace's budget for a purpose today: the namespace's
// daily_cost_cap_usd, else LOOM_DEFAULT_DAILY_COST_CAP_USD; the conflict resolver
// may spend LOOM_MEMORY_CONFLICT_RESOLVER_CAP_SHARE of it over its own calls, and
// stops too once the whole cap is spent. A worker reads it to leave capped
// namespaces out of a pass.
func (p *Provider) Allowance(ctx context.Context, bill Bill) (Budget, error) {
	day := utcDay(p.now())
	s, err := p.ledger.Spent(ctx, bill.Org, bill.Namespace, day, bill.Purpose)
	if err != nil {
		return Budget{}, fmt.Errorf("read the spend of namespace %s: %w", bill.Namespace, err)
	}
	b := Budget{CapUSD: p.cfg.DailyCostCapUSD, SpentUSD: s.TotalUSD, ResetsAt: day.Add(24 * time.Hour)}
	if s.OrgHeld {
		b.Held, b.ResetsAt = true, p.now().Add(HoldRecheck)
	}
	if s.NamespaceCapUSD != nil {
		b.CapUSD = *s.NamespaceCapUSD
	}
	b.PurposeCapUSD, b.PurposeSpentUSD = b.CapUSD, s.TotalUSD
	if bill.Purpose == PurposeConflictResolver {
		b.PurposeCapUSD, b.PurposeSpentUSD = b.CapUSD*p.cfg.ResolverCapShare, s.PurposeUSD
	}
	return b, nil
}

// utcDay is the midnight (UTC) that starts t's day.
func utcDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

type price config.Price

func (pr price) cost(prompt, completion int64) float64 {
	return (float64(prompt)*pr.InputPerMTok + float64(completion)*pr.OutputPerMTok) / 1e6
}

// price is a model's price: its own entry, else the longest entry it starts with (a
// dated snapshot such as gpt-4o-mini-2024-07-18), else LOOM_LLM_DEFAULT_PRICE.
func (p *Provider) price(model string) price {
	if pr, ok := p.cfg.Prices[model]; ok {
		return price(pr)
	}
	best, found := "", false
	for name := range p.cfg.Prices {
		if strings.HasPrefix(model, name+"-") && len(name) > len(best) {
			best, found = name, true
		}
	}
	if found {
		return price(p.cfg.Prices[best])
	}
	return price(p.cfg.DefaultPrice)
}

package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/rowseal"
)

// pageTTL is how long a parked pool serves its next pages.
const pageTTL = 10 * time.Minute

// parkedCandidate is a pool entry as parked: identities and scores, no text.
type parkedCandidate struct {
	Identity  memrow.Identity `json:"id"`
	SHA       string          `json:"sha"`
	Type      string          `json:"type"`
	Scores    map[Leg]float64 `json:"scores"`
	Coverage  float64         `json:"coverage"`
	Fused     float64         `json:"fused"`
	Relevance float64         `json:"relevance"`
}

// parkedPlan is what a next page needs of the search that parked it.
type parkedPlan struct {
	Request    searchRequest     `json:"request"`
	Statuses   []memrow.Status   `json:"statuses"`
	UserID     string            `json:"user_id"`
	Namespaces []string          `json:"namespaces"`
	Offset     int               `json:"offset"`
	Settings   retrievalSettings `json:"settings"`
}

// pagePark parks a page's pool on the batch that reads the page's heads: the first
// window's batch inserts it, parked from the window's end; a refill's batch moves its
// offset to the refill's end. The page's answer names it only when it served hits and
// left some of the pool for a next page.
type pagePark struct {
	plan   *searchPlan
	pool   []*candidate
	keys   *kek.Ring // wraps the page's data key
	id     uuid.UUID
	queued bool
}

// queue queues the parking of the pool from next on, or the move of a parked pool's
// offset to next.
func (pp *pagePark) queue(b *pgx.Batch, next int) error {
	if pp.queued {
		b.Queue(`WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
			UPDATE loom.search_pages SET plan = jsonb_set(plan, '{offset}', to_jsonb($2::int)) FROM async WHERE id = $1`, pp.id, next)
		return nil
	}
	if next >= len(pp.pool) {
		return nil // nothing left for a next page
	}
	plan := pp.plan
	parked := parkedPlan{Request: *plan.req, Statuses: plan.f.statuses, UserID: plan.f.userID, Namespaces: plan.namespaces, Offset: next,
		Settings: plan.settings}
	parked.Request.PageToken = ""
	planJSON, err := json.Marshal(parked)
	if err != nil {
		return fmt.Errorf("park the pool: %w", err)
	}
	scopes, packed, err := packPool(pp.pool)
	if err != nil {
		return fmt.Errorf("park the pool: %w", err)
	}
	// The plan (the request, the user) and the pool (identities) are sealed under a key
	// of the page's own, which goes with its row (migration 156).
	key, storedKey, err := kek.NewKey(pp.keys)
	if err != nil {
		return fmt.Errorf("park the pool: %w", err)
	}
	sealedPlan, err := rowseal.Seal(key, rowseal.LabelPage, planJSON)
	if err != nil {
		return fmt.Errorf("park the pool: %w", err)
	}
	if packed, err = rowseal.Seal(key, rowseal.LabelPagePool, packed); err != nil {
		return fmt.Errorf("park the pool: %w", err)
	}
	pp.id, pp.queued = uuid.New(), true
	// A parked pool is not worth a flush to disk (or the standby) on every search: lost
	// in a crash, its next page answers that the token is unknown and the caller searches
	// again. Measured: 7 ms of a 10k-memory search's p50 at concurrency 1. The setting is
	// the batch's own transaction's, so the insert adds no round trip. The pool column
	// names each scope's user by reference, for the erasure's containment test.
	b.Queue(`WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
		INSERT INTO loom.search_pages (id, org, plan, pool, packed, expires_at, data_key, sealed_plan)
		SELECT $1::uuid, $2::text, jsonb_build_object('offset', $3::int),
			(SELECT coalesce(jsonb_agg(jsonb_build_object('id', jsonb_build_object('namespace', e #>> '{id,namespace}',
				'user_ref', loom.user_ref($2::text, e #>> '{id,user_id}')))), '[]') FROM jsonb_array_elements($4::jsonb) e),
			$5::bytea, now() + $6::interval, $7::bytea, $8::bytea FROM async`,
		pp.id, plan.f.org, next, string(scopes), packed, pageTTL.String(), storedKey, sealedPlan)
	return nil
}

// token is the page's next page token: the parked pool's id when the page served hits
// and left some of the pool, else "" (a pool parked for a page whose every candidate
// was stale is left to expire).
func (pp *pagePark) token(hits, next int) string {
	if pp == nil || !pp.queued || hits == 0 || next >= len(pp.pool) {
		return ""
	}
	return pp.id.String()
}

// parkedPage is a parked pool as stored: its plan and packed pool sealed under its
// data key (sealedPlan), the plan column holding its offset alone.
type parkedPage struct{ plan, scopes, packed, dataKey, sealedPlan []byte }

// opened opens a parked page's sealed plan and pool under its key.
func (pp *parkedPage) opened(keys *kek.Ring) error {
	if pp.sealedPlan == nil {
		return nil
	}
	key, err := kek.OpenKey(keys, pp.dataKey)
	if err != nil {
		return fmt.Errorf("open the parked page's key: %w", err)
	}
	var offset struct {
		Offset int `json:"offset"`
	}
	if err := json.Unmarshal(pp.plan, &offset); err != nil {
		return err
	}
	plan, err := rowseal.Open(key, rowseal.LabelPage, pp.sealedPlan)
	if err != nil {
		return err
	}
	var whole map[string]json.RawMessage
	if err := json.Unmarshal(plan, &whole); err != nil {
		return err
	}
	whole["offset"], _ = json.Marshal(offset.Offset)
	if pp.plan, err = json.Marshal(whole); err != nil {
		return err
	}
	if pp.packed != nil {
		pp.packed, err = rowseal.Open(key, rowseal.LabelPagePool, pp.packed)
	}
	pp.sealedPlan = nil
	return err
}

// queueParkedPage queues the read of the org's pool parked under id on b; *into holds
// it once b is sent, or stays nil when it is unknown or expired.
func queueParkedPage(b *pgx.Batch, org string, id uuid.UUID, into **parkedPage) {
	b.Queue(`SELECT plan, pool, packed, data_key, sealed_plan FROM loom.search_pages WHERE id = $1 AND org = $2 AND expires_at > now()`, id, org).
		QueryRow(func(r pgx.Row) error {
			var pp parkedPage
			err := r.Scan(&pp.plan, &pp.scopes, &pp.packed, &pp.dataKey, &pp.sealedPlan)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read the parked page: %w", err)
			}
			*into = &pp
			return nil
		})
}

// nextPage serves the next page of a parked pool, checked against the heads as they
// are now. The token's org and read scope must be the parking search's.
func (s *Service) nextPage(ctx context.Context, p auth.Principal, plan *searchPlan) (*searchAnswer, error) {
	parked := plan.parked
	if parked == nil {
		return nil, httperr.NotFound("the page token is unknown or expired; search again")
	}
	if err := parked.opened(s.kek); err != nil {
		return nil, err
	}
	var pp parkedPlan
	if err := json.Unmarshal(parked.plan, &pp); err != nil {
		return nil, err
	}
	pool, err := unpackPool(parked.scopes, parked.packed)
	if err != nil {
		return nil, err
	}
	// A token reads only what its own search could have: same read scope, every namespace reachable.
	if pp.UserID != plan.f.userID {
		return nil, httperr.NotFound("the page token is unknown or expired; search again")
	}
	for _, ns := range pp.Namespaces {
		if p.Namespace(ns) != nil {
			return nil, httperr.NotFound("the page token is unknown or expired; search again")
		}
	}
	req := pp.Request
	req.TopK, req.Paging = plan.req.TopK, true
	plan.req, plan.f.statuses, plan.namespaces, plan.settings = &req, pp.Statuses, pp.Namespaces, pp.Settings
	plan.query, plan.trace = planQuery(req.Query, s.referenceTime(&req)), nil
	ans := &searchAnswer{Mode: plan.mode(), Namespaces: plan.namespaces}
	if err := s.servePage(ctx, plan, pool, pp.Offset, ans); err != nil {
		return nil, err
	}
	if len(ans.Hits) == 0 {
		ans.Verdict = VerdictNoMatch
	}
	// A next page keeps its search's caps unless its own request sets some.
	caps := plan.caps
	if caps == nil {
		if caps, err = s.settleCaps(&req); err != nil {
			return nil, err
		}
	}
	capPage(caps, ans)
	return ans, nil
}

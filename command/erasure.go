package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pg"
)

// erasure.request removes a user's memories (in one namespace or across the org), a
// namespace's, or a list of namespaces', from every store, in a way the immutable
// topic cannot undo: the data keys that open the scope's records are destroyed. It is
// a saga of idempotent steps checkpointed in loom.erasure_ledger (erasure_saga.go); a
// request runs it and answers when it is done or after LOOM_ERASURE_REQUEST_WAIT_MS,
// and erasure_recovery completes a saga whose runner stopped.

// The ways to name an erasure's scope.
const (
	scopeUserInNamespace = "user_in_namespace"
	scopeUserInOrg       = "user_in_org"
	scopeNamespaces      = "namespaces"
)

// maxErasureNamespaces bounds a namespace list.
const maxErasureNamespaces = 100

// erasureScope is what an erasure removes: a user's rows (in Namespaces, or in every
// namespace of the org holding any when Namespaces is empty), or whole namespaces.
type erasureScope struct {
	Kind       string   `json:"kind"`
	UserID     string   `json:"user_id,omitempty"`
	Namespaces []string `json:"namespaces,omitempty"`
}

// erasureRequest is the body of POST /v1/erasures.
type erasureRequest struct {
	UserID     *string  `json:"user_id"`
	Namespace  *string  `json:"namespace"`
	Namespaces []string `json:"namespaces"`
	Purge      bool     `json:"purge"`
}

// scopeOf validates a request's scope against the token: a user in a namespace or in
// the org, one namespace or a list of them, each within the token's reach.
func scopeOf(req erasureRequest, p auth.Principal) (erasureScope, error) {
	var sc erasureScope
	switch {
	case req.UserID != nil && req.Namespaces != nil:
		return sc, httperr.Validation("namespaces", "a user's erasure names one namespace or none (the whole org)")
	case req.Namespace != nil && req.Namespaces != nil:
		return sc, httperr.Validation("namespaces", "name one namespace or a list, not both")
	case req.UserID != nil:
		if *req.UserID == "" || *req.UserID == memrow.DefaultIdentity {
			return sc, httperr.Validation("user_id", "user_id names one user")
		}
		if err := memrow.ValidateIdentity("user_id", *req.UserID); err != nil {
			return sc, err
		}
		sc.UserID = *req.UserID
		if req.Namespace == nil {
			if p.Namespaces != nil {
				return sc, httperr.New(http.StatusForbidden, httperr.CodePermissionDenied, "erasing a user across the org needs a token that reaches every namespace")
			}
			sc.Kind = scopeUserInOrg
			return sc, nil
		}
		sc.Kind, sc.Namespaces = scopeUserInNamespace, []string{*req.Namespace}
	case req.Namespace != nil:
		sc.Kind, sc.Namespaces = scopeNamespaces, []string{*req.Namespace}
	case len(req.Namespaces) > 0:
		if len(req.Namespaces) > maxErasureNamespaces {
			return sc, httperr.Validation("namespaces", fmt.Sprintf("at most %d namespaces per erasure", maxErasureNamespaces))
		}
		sc.Kind, sc.Namespaces = scopeNamespaces, req.Namespaces
	default:
		return sc, httperr.Validation("body", "name a scope: user_id (with a namespace, or none for the whole org), namespace or namespaces")
	}
	seen := map[string]bool{}
	var list []string
	for _, ns := range sc.Namespaces {
		if err := p.Namespace(ns); err != nil {
			return sc, err
		}
		if !seen[ns] {
			seen[ns] = true
			list = append(list, ns)
		}
	}
	sort.Strings(list)
	sc.Namespaces = list
	return sc, nil
}

// erasureView is how a saga is answered.
type erasureView struct {
	ID           string           `json:"id"`
	Status       string           `json:"status"`
	Scope        map[string]any   `json:"scope"`
	Purge        bool             `json:"purge"`
	Actor        string           `json:"actor"`
	Steps        []stepView       `json:"steps"`
	Fences       map[string]int64 `json:"fences"`
	Removed      map[string]int64 `json:"removed"`
	Attempts     int              `json:"attempts"`
	LastError    string           `json:"last_error,omitempty"`
	Residue      map[string]int64 `json:"residue"`
	ResidueCount *int64           `json:"residue_count"`
	Census       map[string]int64 `json:"census"`
	RequestedAt  time.Time        `json:"requested_at"`
	VerifiedAt   *time.Time       `json:"verified_at,omitempty"`
	FinishedAt   *time.Time       `json:"finished_at,omitempty"`
}

// stepView is one step of a saga: done once CompletedAt is set; Reopened counts the
// times a residue census sent the saga back to it.
type stepView struct {
	Name        string     `json:"name"`
	CompletedAt *time.Time `json:"completed_at"`
	Reopened    int        `json:"reopened,omitempty"`
}

func (sg *erasureSaga) view() erasureView {
	scope := map[string]any{"kind": sg.Scope.Kind}
	if sg.Scope.UserID != "" {
		scope["user_id"] = sg.Scope.UserID
	}
	switch {
	case sg.Scope.Kind == scopeUserInNamespace:
		scope["namespace"] = sg.Scope.Namespaces[0]
	case sg.Scope.Kind == scopeNamespaces:
		scope["namespaces"] = sg.Scope.Namespaces
	}
	v := erasureView{ID: sg.ID, Status: sg.Status, Scope: scope, Purge: sg.Purge, Actor: sg.Actor, Fences: sg.Fences,
		Removed: sg.Removed, Attempts: sg.Attempts, LastError: sg.LastError, Residue: sg.Residue,
		ResidueCount: sg.ResidueCount, Census: sg.Census, RequestedAt: sg.RequestedAt, VerifiedAt: sg.VerifiedAt,
		FinishedAt: sg.FinishedAt}
	for _, name := range sagaSteps() {
		st := stepView{Name: name, Reopened: sg.Reopened[name]}
		if at, ok := sg.Steps[name]; ok {
			st.CompletedAt = &at
		}
		v.Steps = append(v.Steps, st)
	}
	for _, m := range []*map[string]int64{&v.Residue, &v.Census, &v.Fences, &v.Removed} {
		if *m == nil {
			*m = map[string]int64{}
		}
	}
	return v
}

// requestErasure is erasure.request (admin tokens only): it records the saga, runs
// it and answers once it finished (completed or failed), or while it still runs after
// LOOM_ERASURE_REQUEST_WAIT_MS (status running: the route answers 202); erasure.get
// follows it.
func (s *Service) requestErasure(ctx context.Context, p auth.Principal, req erasureRequest) (erasureView, error) {
	scope, err := scopeOf(req, p)
	if err != nil {
		return erasureView{}, err
	}
	// A token bound to one user erases that user alone: never another user, never a
	// namespace (every user's rows).
	if scope.UserID == "" {
		err = p.RequireEveryUser("erasing a namespace")
	} else {
		err = p.RequireUser(scope.UserID, "an erasure")
	}
	if err != nil {
		return erasureView{}, err
	}
	if scope.UserID == "" {
		// The shared rows promoted from these namespaces into others go first
		// (cross_promote.go): the saga erases within its namespaces alone.
		if err := s.withdrawCopies(ctx, p, scope.Namespaces, "", req.Purge); err != nil {
			return erasureView{}, httperr.Store("withdrawing the copies promoted from the namespaces", err)
		}
	} else {
		// The shared rows promoted from the user's memories go first too: the saga
		// erases by user_id, which no shared row holds.
		var within []string
		if scope.Kind == scopeUserInNamespace {
			within = scope.Namespaces
		}
		if err := s.withdrawUserPromotions(ctx, p, scope.UserID, within, "", req.Purge); err != nil {
			return erasureView{}, httperr.Store("withdrawing the rows promoted from the user's memories", err)
		}
	}
	id := uuid.NewString()
	raw, err := json.Marshal(scope)
	if err != nil {
		return erasureView{}, err
	}
	// Recorded under the org's policy lock held exclusively, which every commit holds
	// shared: a worker's commit that checks the org for a running erasure (the
	// conflict resolver's, the entity extractor's) either ended before this record or
	// sees it.
	if err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf("SELECT pg_advisory_xact_lock(%s)", policyLockKey), p.Org); err != nil {
			return err
		}
		return s.insertSaga(ctx, tx, p.Org, id, raw, req.Purge, p.Actor())
	}); err != nil {
		return erasureView{}, httperr.Store("recording the erasure", err)
	}
	// The saga outlives the request: a caller that stops waiting does not stop it.
	done := make(chan struct{})
	go func() {
		defer close(done)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Erasure.Lease)
		defer cancel()
		if err := s.runSaga(sctx, p.Org, id, 1); err != nil {
			s.log.Warn("erasure: the saga stopped before it finished; erasure_recovery resumes it", "erasure", id, "err", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(s.cfg.Erasure.RequestWait):
	case <-ctx.Done():
	}
	sg, err := s.loadSaga(context.WithoutCancel(ctx), p.Org, id)
	if err != nil {
		return erasureView{}, httperr.Store("reading the erasure", err)
	}
	return sg.view(), nil
}

// getErasure is erasure.get: a saga's steps, fences, residue and census.
func (s *Service) getErasure(ctx context.Context, p auth.Principal, id string) (erasureView, error) {
	if _, err := uuid.Parse(id); err != nil {
		return erasureView{}, httperr.NotFound("erasure not found")
	}
	sg, err := s.loadSaga(ctx, p.Org, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return erasureView{}, httperr.NotFound("erasure not found")
	}
	if err != nil {
		return erasureView{}, httperr.Store("reading the erasure", err)
	}
	// A token bound to one user learns nothing of an erasure of anyone else's rows.
	if p.ReadUserID != "" && sg.Scope.UserID != p.ReadUserID {
		own, err := s.erasedOwnUser(ctx, p, sg)
		if err != nil {
			return erasureView{}, httperr.Store("reading the erasure", err)
		}
		if !own {
			return erasureView{}, httperr.NotFound("erasure not found")
		}
	}
	return sg.view(), nil
}

// erasedOwnUser reports whether sg erased the user p is bound to: once the erasure
// deleted the user's name, the token reads as auth.ErasedUser, and its row's reference
// still names the user, so it follows its own user's erasure to the end.
func (s *Service) erasedOwnUser(ctx context.Context, p auth.Principal, sg *erasureSaga) (bool, error) {
	if p.ReadUserID != auth.ErasedUser || sg.Scope.UserID == "" {
		return false, nil
	}
	// The token's row was named under whichever live key was current then.
	refs, err := s.userRefs.Refs(ctx, p.Org, sg.Scope.UserID)
	if err != nil {
		return false, fmt.Errorf("reference the erasure's user: %w", err)
	}
	return slices.Contains(refs, p.ReadUserRef), nil
}

func requireAdminFor(p auth.Principal, what string) error { return p.RequireAdmin(what) }

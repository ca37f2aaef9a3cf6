package command

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
)

// namespace.delete soft-deletes a namespace: its rows, history and search documents
// stay, but it is neither read (its reads and writes answer 404) nor judged (the
// workers leave its queued items owed) until PUT /v1/namespaces/{ns} registers it
// again, which brings all of it back. It is a policy change: it advances the org's
// policy generation, so a write that read the namespace's policy before it is refused
// at its commit and reads it again. To remove the rows, erase the namespace.

// namespaceDeleteAnswer is what namespace.delete answers.
type namespaceDeleteAnswer struct {
	Namespace string    `json:"namespace"`
	Deleted   bool      `json:"deleted"`
	WasLive   bool      `json:"was_live"`
	DeletedAt time.Time `json:"deleted_at"`
}

// deleteNamespace is namespace.delete.
func (s *Service) deleteNamespace(ctx context.Context, p auth.Principal, ns string) (*namespaceDeleteAnswer, error) {
	raw, err := json.Marshal(DefaultConfig())
	if err != nil {
		return nil, err
	}
	var wasLive bool
	err = s.changePolicy(ctx, p.Org, func(tx pgx.Tx) error {
		wasLive, err = softDeleteNamespace(ctx, tx, p.Org, ns, raw, p.Actor())
		return err
	})
	if err != nil {
		return nil, httperr.Store("deleting the namespace", err)
	}
	return &namespaceDeleteAnswer{Namespace: ns, Deleted: true, WasLive: wasLive, DeletedAt: s.now().UTC()}, nil
}

// refuseDeletedNamespace answers 404 (namespaceDeleted) for a soft-deleted namespace:
// the check of a write that commits nothing through the one commit (a touch, a
// redaction) or reads its source in another namespace than it commits to (promote,
// copy, move). The copy writers' commits check again under the policy lock
// (commitPlan.liveNamespace).
func (s *Service) refuseDeletedNamespace(ctx context.Context, org, ns string) error {
	var deleted bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM loom.namespaces WHERE org = $1 AND namespace = $2 AND deleted_at IS NOT NULL)`,
		org, ns).Scan(&deleted); err != nil {
		return httperr.Store("reading whether the namespace was deleted", err)
	}
	if deleted {
		return namespaceDeleted(ns)
	}
	return nil
}

// namespaceDeleted is the refusal of a read or write of a soft-deleted namespace.
func namespaceDeleted(ns string) *httperr.Error {
	return httperr.NotFound("namespace " + ns + " was deleted; PUT /v1/namespaces/" + ns + " registers it again")
}

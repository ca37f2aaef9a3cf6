package command

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pg"
)

// memory.cross_promote is memory.promote (promote.go) into another namespace the token
// reaches: the source, a user's row or a namespace's shared row, becomes the shared row
// of its key in target_namespace, its provenance naming the namespace it came from. A
// promotion back the other way is one more cross_promote. The two commits are the
// target namespace's alone: a cross-namespace promotion is not atomic with anything
// in the source namespace.
//
// The copies follow their source's namespace out: an erasure of a namespace first
// withdraws the shared rows promoted from it into other namespaces (withdrawCopies),
// each deleted and every version of it redacted, which destroys their text in both
// stores and on the topic as memory.redact does; then its rows go, in both stores, as
// the erasure's own do. A redacted row keeps its key (sealed under its redaction's
// key in Postgres, in the clear in ClickHouse), and a copy's key is the erased
// memory's.

// withdrawCopies removes the shared rows other namespaces hold that were promoted from
// any of namespaces (an erasure's, which takes their own rows itself).
func (s *Service) withdrawCopies(ctx context.Context, p auth.Principal, namespaces []string, requestID string, purge bool) error {
	for _, ns := range namespaces {
		copies, err := s.copiesPromotedFrom(ctx, p.Org, ns)
		if err != nil {
			return err
		}
		for _, c := range copies {
			if slices.Contains(namespaces, c.namespace) {
				continue
			}
			if err := s.withdrawCopy(ctx, p, c, requestID, purge); err != nil {
				return fmt.Errorf("withdraw the copy %s/%s promoted from %s: %w", c.namespace, c.key, ns, err)
			}
		}
	}
	return nil
}

// withdrawUserPromotions removes the shared rows promoted from a user's memories (in
// namespaces, or across the org when namespaces is nil) and the copies made of them:
// a user erasure's first step, as the seed matches them by provenance
// (memory-architecture.md, "a user erasure matches them by provenance"). The saga
// erases by user_id, which a shared row (memrow.SharedUser) never holds.
func (s *Service) withdrawUserPromotions(ctx context.Context, p auth.Principal, userID string, namespaces []string, requestID string, purge bool) error {
	promoted, err := s.promotedFromUser(ctx, p.Org, userID, namespaces)
	if err != nil {
		return err
	}
	for _, c := range promoted {
		if err := s.withdrawCopy(ctx, p, c, requestID, purge); err != nil {
			return fmt.Errorf("withdraw the shared row %s/%s promoted from %s: %w", c.namespace, c.key, userID, err)
		}
	}
	return nil
}

// withdrawCopy deletes a shared row and redacts each of its values: the first version
// of every run of one content (a redaction scrubs the run that copies it), each
// redaction's record asking the projection to drop the copy's rows (purge: its audit
// rows too); then it deletes the copy's head and revisions, with the redaction keys
// that open its key. A record whose head is gone (an erasure took it, or an earlier
// withdrawal) is forgotten alone.
func (s *Service) withdrawCopy(ctx context.Context, p auth.Principal, c sharedCopy, requestID string, purge bool) error {
	if c.key == "" {
		return forgetPromotion(ctx, s.pool, p.Org, c)
	}
	id := memrow.SharedIdentity(p.Org, c.namespace, c.key)
	if _, err := s.demote(ctx, p, demoteCall{origin: origin{requestID: requestID}, namespace: id.Namespace, key: id.MemoryKey, withdraw: true}); err != nil {
		var he *httperr.Error
		if !errors.As(err, &he) || he.Status != http.StatusNotFound {
			return err
		}
		// No head is left (an erasure took it): only the record of the promotion is.
		return forgetPromotion(ctx, s.pool, p.Org, c)
	}
	versions, err := heads.KeyRevisions(ctx, s.pool, id)
	if err != nil {
		return fmt.Errorf("read the copy's versions: %w", err)
	}
	prev := ""
	for _, v := range versions {
		if v.ContentSHA256 == prev {
			continue
		}
		prev = v.ContentSHA256
		if v.Redacted {
			continue
		}
		if _, err := s.redactVersion(ctx, p, id, v.Version, requestID, &events.Withdrawal{Purge: purge}); err != nil {
			return err
		}
	}
	if err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		gone, err := eraseWithdrawnHead(ctx, tx, id)
		if err != nil || !gone {
			return err
		}
		return eraseWithdrawnRevisions(ctx, tx, id)
	}); err != nil {
		return err
	}
	return forgetPromotion(ctx, s.pool, p.Org, c)
}

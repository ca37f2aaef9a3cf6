package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Approval is a dataset's catalog row (loom.knowledge_datasets, migration 132): the
// schema approved for it at a document version.
type Approval struct {
	DocVersion int64           `json:"doc_version"`
	DatasetID  string          `json:"dataset_id"`
	Schema     json.RawMessage `json:"schema"`
	ApprovedBy string          `json:"approved_by"`
	ApprovedAt time.Time       `json:"approved_at"`
}

// ShareHead reads a source's head in tx under a share lock, its text opened: a commit
// that would move it, and an erasure that would delete it, wait for tx to end.
// ErrNoHead when it has none.
func ShareHead(ctx context.Context, tx pgx.Tx, org, ns, uri string) (*Head, error) {
	h, err := scanHead(org, ns, tx.QueryRow(ctx, `SELECT `+headColumns+`, `+openedText+`
		FROM loom.knowledge_heads h JOIN loom.knowledge_revisions k USING (org, namespace, seq)
		WHERE h.org = $1 AND h.namespace = $2 AND h.source_uri = $3 FOR SHARE OF h`, org, ns, uri), true)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNoHead
	}
	if err != nil {
		return nil, fmt.Errorf("read the head of %q: %w", uri, err)
	}
	return h, nil
}

// Approve writes a dataset's catalog row at h's version (an approval already there
// stays as it was) and returns the row the catalog holds.
func Approve(ctx context.Context, tx pgx.Tx, h *Head, datasetID string, schema any, actor string) (*Approval, error) {
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("encode the dataset's schema: %w", err)
	}
	// The row is the document's user's, as its head is: a user's erasure takes it.
	if _, err := tx.Exec(ctx, `INSERT INTO loom.knowledge_datasets (org, namespace, source_uri, doc_version, dataset_id, seq, schema, approved_by, user_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, loom.named_user($1, $9)) ON CONFLICT DO NOTHING`,
		h.Org, h.Namespace, h.SourceURI, h.Version, datasetID, h.Seq, raw, actor, h.UserID); err != nil {
		return nil, fmt.Errorf("write the dataset's catalog row: %w", err)
	}
	as, err := Approvals(ctx, tx, h.Org, h.Namespace, h.SourceURI, h.Version)
	if err != nil {
		return nil, err
	}
	for _, a := range as {
		if a.DatasetID == datasetID {
			return a, nil
		}
	}
	return nil, fmt.Errorf("the catalog row of %s is not there after its write", datasetID)
}

// Approvals reads a source's catalog rows at a document version.
func Approvals(ctx context.Context, q Querier, org, ns, uri string, version int64) ([]*Approval, error) {
	rows, err := q.Query(ctx, `SELECT doc_version, dataset_id, schema, approved_by, approved_at FROM loom.knowledge_datasets
		WHERE org = $1 AND namespace = $2 AND source_uri = $3 AND doc_version = $4 ORDER BY dataset_id`, org, ns, uri, version)
	if err != nil {
		return nil, fmt.Errorf("read the dataset catalog of %q: %w", uri, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Approval, error) {
		a := &Approval{}
		return a, r.Scan(&a.DocVersion, &a.DatasetID, &a.Schema, &a.ApprovedBy, &a.ApprovedAt)
	})
	if err != nil {
		return nil, fmt.Errorf("read the dataset catalog of %q: %w", uri, err)
	}
	return out, nil
}

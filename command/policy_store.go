package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/generations"
)

// The write side's statements of a namespace's policy: loom.namespaces (its
// configuration) and loom.blacklist (its patterns and their last sweeps).

// queuePolicy queues the reads of a namespace's policy on a batch, so a write reads
// it in the same round trip as its head; finish decodes what the batch read.
func queuePolicy(b *pgx.Batch, org, ns string) (finish func() (*policy, error)) {
	p := &policy{config: DefaultConfig()}
	var raw []byte
	var compileErr error
	generations.QueueRead(b, org, policyScope, &p.generation)
	b.Queue(`SELECT config, deleted_at IS NOT NULL FROM loom.namespaces WHERE org = $1 AND namespace = $2`, org, ns).
		QueryRow(func(r pgx.Row) error {
			if err := r.Scan(&raw, &p.deleted); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			return nil
		})
	b.Queue(`SELECT pattern FROM loom.blacklist WHERE org = $1 AND namespace = $2 ORDER BY pattern`, org, ns).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var pat string
				if err := rows.Scan(&pat); err != nil {
					return err
				}
				re, err := regexp.Compile(pat)
				if err != nil && compileErr == nil {
					// Stored patterns were compiled when added; a build whose regexp
					// refuses one must not silently let the value through.
					compileErr = fmt.Errorf("blacklist pattern %q no longer compiles: %w", pat, err)
				}
				p.blacklist = append(p.blacklist, blacklistEntry{pattern: pat, re: re})
			}
			return rows.Err()
		})
	queueAllowlist(b, org, ns, p)
	return func() (*policy, error) {
		if compileErr != nil {
			return nil, compileErr
		}
		if raw != nil {
			if err := json.Unmarshal(raw, &p.config); err != nil {
				return nil, fmt.Errorf("decode the namespace config: %w", err)
			}
		}
		return p, nil
	}
}

// addPattern is blacklist.add: an RE2 pattern no value of the namespace may match from
// the next admission on (422 BLACKLISTED).
func addPattern(ctx context.Context, tx pgx.Tx, p auth.Principal, ns, pattern string) error {
	_, err := tx.Exec(ctx, `INSERT INTO loom.blacklist (org, namespace, pattern, created_by) VALUES ($1, $2, $3, $4)
		ON CONFLICT DO NOTHING`, p.Org, ns, pattern, p.Actor())
	return err
}

// removePattern is blacklist.remove.
func removePattern(ctx context.Context, tx pgx.Tx, p auth.Principal, ns, pattern string) error {
	_, err := tx.Exec(ctx, `DELETE FROM loom.blacklist WHERE org = $1 AND namespace = $2 AND pattern = $3`, p.Org, ns, pattern)
	return err
}

// storeConfig replaces a namespace's configuration.
func storeConfig(ctx context.Context, tx pgx.Tx, org, ns string, config []byte, actor string) error {
	_, err := tx.Exec(ctx, `INSERT INTO loom.namespaces (org, namespace, config, updated_by) VALUES ($1, $2, $3, $4)
			ON CONFLICT (org, namespace) DO UPDATE SET config = EXCLUDED.config, updated_at = now(), updated_by = EXCLUDED.updated_by,
				deleted_at = NULL, deleted_by = NULL`,
		org, ns, config, actor)
	return err
}

// softDeleteNamespace marks a namespace deleted (namespace.delete), registering it with
// config when it had no configuration of its own; it reports whether it was live.
func softDeleteNamespace(ctx context.Context, tx pgx.Tx, org, ns string, config []byte, actor string) (bool, error) {
	var wasLive bool
	err := tx.QueryRow(ctx, `WITH before AS (SELECT deleted_at FROM loom.namespaces WHERE org = $1 AND namespace = $2)
		INSERT INTO loom.namespaces (org, namespace, config, updated_by, deleted_at, deleted_by) VALUES ($1, $2, $3, $4, now(), $4)
			ON CONFLICT (org, namespace) DO UPDATE SET deleted_at = coalesce(loom.namespaces.deleted_at, now()),
				deleted_by = coalesce(loom.namespaces.deleted_by, EXCLUDED.deleted_by)
		RETURNING NOT EXISTS (SELECT 1 FROM before WHERE deleted_at IS NOT NULL)`, org, ns, config, actor).Scan(&wasLive)
	return wasLive, err
}

// createNamespace gives a namespace with no configuration of its own config; it
// reports whether it did.
func createNamespace(ctx context.Context, tx pgx.Tx, org, ns string, config []byte, actor string) (bool, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO loom.namespaces (org, namespace, config, updated_by) VALUES ($1, $2, $3, $4)
			ON CONFLICT DO NOTHING`, org, ns, config, actor)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// recordPatternSweep keeps a pattern's last sweep on its row: when, what it matched,
// and the error that stopped it (nil: none).
func (s *Service) recordPatternSweep(ctx context.Context, org, ns, pattern string, matched int64, sweepErr *string) error {
	_, err := s.pool.Exec(ctx, `UPDATE loom.blacklist SET swept_at = now(), sweep_matched = $4, sweep_error = $5
			WHERE org = $1 AND namespace = $2 AND pattern = $3`, org, ns, pattern, matched, sweepErr)
	return err
}

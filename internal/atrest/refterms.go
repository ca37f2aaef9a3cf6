package atrest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/evidence"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/rowseal"
)

// rehashTerms computes again, under the term key of org's current user reference key
// (evidence.TermKey), the term hashes of each of its turns (loom.memory_evidence.terms)
// from the turn's sealed text, as memory.observe hashed them, so memory.recall, which
// hashes a question under the current key, finds the turns kept before the rotation.
// A turn hashed under the current key already hashes the same; one whose text no
// longer opens (its key redacted) keeps no terms.
func rehashTerms(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring, org string) (int64, error) {
	var stored []byte
	if err := pool.QueryRow(ctx, `SELECT key FROM loom.user_ref_keys WHERE org = $1`, org).Scan(&stored); err != nil {
		return 0, fmt.Errorf("read the current key: %w", err)
	}
	key, err := kek.OpenKey(ring, stored)
	if err != nil {
		return 0, fmt.Errorf("open the current key: %w", err)
	}
	termKey := evidence.TermKey(key)
	var n int64
	err = walk(ctx, pool, "loom.memory_evidence", func(from, to pgtype.TID) error {
		k, err := rehashTermsIn(ctx, pool, ring, termKey, org, from, to)
		n += k
		return err
	})
	return n, err
}

// rehashTermsIn rehashes the terms of org's turns in a page range.
func rehashTermsIn(ctx context.Context, pool *pgxpool.Pool, ring *kek.Ring, termKey []byte, org string, from, to pgtype.TID) (int64, error) {
	rows, err := pool.Query(ctx, `SELECT ctid, data_key, sealed, terms FROM loom.memory_evidence
		WHERE ctid >= $1 AND ctid < $2 AND org = $3 AND terms IS NOT NULL`, from, to, org)
	if err != nil {
		return 0, err
	}
	type turn struct {
		tid         pgtype.TID
		key, sealed []byte
		terms       []int64
	}
	turns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (turn, error) {
		var t turn
		return t, r.Scan(&t.tid, &t.key, &t.sealed, &t.terms)
	})
	if err != nil || len(turns) == 0 {
		return 0, err
	}
	var tids []pgtype.TID
	var olds, news []string
	for _, t := range turns {
		fresh := []int64{}
		if t.key != nil && t.sealed != nil {
			text, err := turnText(ring, t.key, t.sealed)
			if err != nil {
				return 0, err
			}
			fresh = evidence.TermHashes(termKey, text)
		}
		tids, olds, news = append(tids, t.tid), append(olds, int64sLiteral(t.terms)), append(news, int64sLiteral(fresh))
	}
	// Only a turn whose terms are still those read (an erasure may have deleted it).
	tag, err := pool.Exec(ctx, `UPDATE loom.memory_evidence e SET terms = v.new::bigint[]
		FROM unnest($1::tid[], $2::text[], $3::text[]) AS v(tid, old, new)
		WHERE e.ctid = v.tid AND e.terms = v.old::bigint[] AND e.terms IS DISTINCT FROM v.new::bigint[]`, tids, olds, news)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// turnText opens a turn's text (evidence.Seal).
func turnText(ring *kek.Ring, storedKey, sealed []byte) (string, error) {
	key, err := kek.OpenKey(ring, storedKey)
	if err != nil {
		return "", fmt.Errorf("open a turn's key: %w", err)
	}
	plain, err := rowseal.Open(key, rowseal.LabelTurn, sealed)
	if err != nil {
		return "", err
	}
	var t struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(plain, &t); err != nil {
		return "", fmt.Errorf("decode a turn's text: %w", err)
	}
	return t.Text, nil
}

// int64sLiteral is v as a bigint[] literal.
func int64sLiteral(v []int64) string {
	b := []byte{'{'}
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%d", x)
	}
	return string(append(b, '}'))
}

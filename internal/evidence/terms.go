package evidence

// This file owns loom.memory_evidence's terms column (migration 118): a blind index of
// each turn's words, so memory.recall opens the turns that can answer a question
// rather than every recent one.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/loomplane/loom/internal/text"
)

// A turn's terms are its words' index terms (text.Terms: stopwords dropped, stemmed),
// each kept as the first 8 bytes of HMAC-SHA256 under the org's term key: equal words
// hash equal, so Postgres finds the turns sharing a query's words with the array
// overlap operator without opening one, and the column names no word to a reader
// without the org's key. What it shows such a reader is which turns of a namespace
// share a word, and how often: the price of a question not opening five thousand
// turns. An erasure or a redaction deletes the row, and its terms with it.

// TermKey derives the org's term key from its user reference key (internal/userref),
// which both sides read: one key per org, never the one that names users.
func TermKey(orgKey []byte) []byte {
	m := hmac.New(sha256.New, orgKey)
	m.Write([]byte("loom.turn.terms"))
	return m.Sum(nil)
}

// TermHashes are the distinct hashes of a text's index terms under a term key.
func TermHashes(termKey []byte, s string) []int64 {
	seen := map[string]bool{}
	out := []int64{}
	for _, t := range text.Terms(s) {
		if seen[t] {
			continue
		}
		seen[t] = true
		out = append(out, termHash(termKey, t))
	}
	return out
}

func termHash(termKey []byte, term string) int64 {
	m := hmac.New(sha256.New, termKey)
	m.Write([]byte(term))
	return int64(binary.BigEndian.Uint64(m.Sum(nil)[:8]))
}

// Candidate is a recent turn that may answer a query: one sharing a hashed term with
// it (Terms), or one kept before turns had terms, opened (Opened set, Terms nil).
// SessionRef is its session as the row stores it (the reference), which Span reads
// by; Opened's SessionID answers the session.
type Candidate struct {
	TurnID, UserID, SessionRef string
	MessageIndex               int
	OccurredAt                 time.Time
	Terms                      []int64
	Opened                     *Opened
}

// Candidates reads, among the scope's limit most recent turns (newest first), those
// whose terms overlap query's, and how many turns it looked among. The read carries no
// sealed text and touches no turn that shares no term: the recent turns are only a cut,
// the limit-th newest turn's time and index (an index-only walk of
// memory_evidence_recent), and the turns at or after it sharing a term come from the
// terms' GIN index (migration 162). A turn tied with the cut at its time and index is
// among them. Turns kept before the terms column (NULL) are read again, opened in Go
// with unwrap, for the caller to match by their text.
func Candidates(ctx context.Context, q Querier, s Scope, limit int, query []int64, unwrap func([]byte) ([]byte, error)) ([]Candidate, int, error) {
	// One user's turns are a walk of memory_evidence_recent that stops at the cap; every
	// user's, a top-N sort of the namespace's narrow columns. Two statements, so each
	// plans for its own predicate. The user's reference is computed once (me): in a
	// filter, loom.user_ref would open the org's key for every row.
	scoped := `e.user_id = (SELECT ref FROM me)`
	if s.UserID == "" {
		scoped = `$3 = ''`
	}
	rows, err := q.Query(ctx, `WITH me AS (SELECT loom.user_ref($1, $3) AS ref),
		cut AS (SELECT e.occurred_at, e.message_index FROM loom.memory_evidence e
			WHERE e.org = $1 AND e.namespace = $2 AND `+scoped+`
			ORDER BY e.occurred_at DESC, e.message_index DESC OFFSET $4 - 1 LIMIT 1),
		-- fewer turns than the cap: every one is looked among, and counted
		edge AS (SELECT coalesce((SELECT $4::bigint FROM cut), (SELECT count(*) FROM loom.memory_evidence e
				WHERE e.org = $1 AND e.namespace = $2 AND `+scoped+`)) AS scanned,
			coalesce((SELECT occurred_at FROM cut), '-infinity') AS cut_at, coalesce((SELECT message_index FROM cut), -1) AS cut_index),
		hits AS (SELECT e.turn_id, e.user_id, e.session_id, e.message_index, e.occurred_at, e.terms
			FROM loom.memory_evidence e, edge g
			WHERE e.org = $1 AND e.namespace = $2 AND `+scoped+` AND (e.terms && $5::bigint[] OR e.terms IS NULL)
			  AND (e.occurred_at, e.message_index) >= (g.cut_at, g.cut_index)),
		-- each user named once (the column holds the reference, migration 155)
		names AS (SELECT u.user_id, loom.user_name($1, u.user_id) AS name FROM (SELECT DISTINCT user_id FROM hits) u)
		SELECT g.scanned, r.turn_id::text, n.name, r.session_id, r.message_index, r.occurred_at, r.terms
		FROM hits r JOIN names n USING (user_id), edge g
		ORDER BY r.occurred_at DESC, r.message_index DESC`, s.Org, s.Namespace, s.UserID, limit, query)
	if err != nil {
		return nil, 0, fmt.Errorf("read the candidate turns: %w", err)
	}
	var out []Candidate
	var scanned int
	var unindexed []string
	at := map[string]int{}
	for rows.Next() {
		var c Candidate
		if err := rows.Scan(&scanned, &c.TurnID, &c.UserID, &c.SessionRef, &c.MessageIndex, &c.OccurredAt, &c.Terms); err != nil {
			rows.Close()
			return nil, 0, fmt.Errorf("read the candidate turns: %w", err)
		}
		if c.Terms == nil {
			unindexed = append(unindexed, c.TurnID)
			at[c.TurnID] = len(out)
		}
		out = append(out, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("read the candidate turns: %w", err)
	}
	if len(unindexed) > 0 {
		rows, err := q.Query(ctx, `SELECT `+sealedCols+` FROM loom.memory_evidence e
			WHERE e.org = $1 AND e.namespace = $2 AND e.turn_id = ANY($3::uuid[])`, s.Org, s.Namespace, unindexed)
		if err != nil {
			return nil, 0, fmt.Errorf("read the unindexed turns: %w", err)
		}
		err = openRows(rows, unwrap, nil, func(o Opened) { out[at[o.TurnID]].Opened = &o })
		if err != nil {
			return nil, 0, fmt.Errorf("read the unindexed turns: %w", err)
		}
	}
	return out, scanned, nil
}

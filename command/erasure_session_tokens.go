package command

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// A token bound to a session and no user seals its session under a key of its own
// (loom.api_tokens.read_session_key, migration 179), which no user's name key shares.
// The erasure destroys that key with the last of the session's rows it removes, as it
// deletes a user's name with the last of the user's: a token whose session held rows
// of the erasure's scope, and whose session names no row of the org after it, reads
// as auth.ErasedSession from then on (no session id equals it, so it reaches no
// session's rows), in the table, its rotations and every process's cache (the step
// notifies the revocations' channel). A session that still names rows (another
// user's, another namespace's, written at or after the fence) is not erased: its
// tokens keep it.

// sessionRowTables hold rows by their session's reference (session_id, loom.session_ref:
// migrations 173, 176, 177); a session names a row of the org while any holds it.
var sessionRowTables = []string{
	"loom.memory_revisions", "loom.memory_evidence", "loom.memory_chunks", "loom.extraction_requests",
	"loom.session_summaries", "loom.session_outcomes", "loom.learnings_supporters",
}

// sessionsHolding is the query of which of the session references $2 hold a row of
// the org ($1) in any of the tables above, restricted by where (over alias r): one
// pass over each table's rows of the org (or of the scope), whatever the number of
// sessions asked about.
func sessionsHolding(where string) string {
	parts := make([]string, len(sessionRowTables))
	for i, table := range sessionRowTables {
		parts[i] = `SELECT r.session_id FROM ` + table + ` r WHERE r.org = $1 AND r.session_id = ANY($2::text[])` + where
	}
	return strings.Join(parts, " UNION ")
}

// sessionTokens are an org's tokens bound to a session alone whose key still opens it,
// by their session's reference.
type sessionTokens map[string][]string

// readSessionTokens reads the org's tokens bound to a session alone whose key still
// opens it, once per step: most orgs have none, and then the step reads no more.
func readSessionTokens(ctx context.Context, tx pgx.Tx, org string) (sessionTokens, error) {
	rows, err := tx.Query(ctx, `SELECT token_id, loom.session_ref(org, loom.token_session(org, read_user_id, read_session, read_session_key))
		FROM loom.api_tokens WHERE org = $1 AND read_session IS NOT NULL AND read_session_key IS NOT NULL
		  AND coalesce(read_user_id, '') IN ('', '-')`, org)
	if err != nil {
		return nil, fmt.Errorf("read the session-bound tokens: %w", err)
	}
	out := sessionTokens{}
	var id string
	var ref *string
	_, err = pgx.ForEachRow(rows, []any{&id, &ref}, func() error {
		if ref != nil && *ref != "" && *ref != "-" {
			out[*ref] = append(out[*ref], id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the session-bound tokens: %w", err)
	}
	return out, nil
}

// inScope adds to into the sessions of tokens that hold rows of the erasure's scope in
// namespace ns (every user's, or user's alone), read after the namespace's fence and
// before its rows go.
func (tokens sessionTokens) inScope(ctx context.Context, tx pgx.Tx, org, ns, user string, into map[string]bool) error {
	if len(tokens) == 0 {
		return nil
	}
	refs := make([]string, 0, len(tokens))
	for ref := range tokens {
		refs = append(refs, ref)
	}
	rows, err := tx.Query(ctx, sessionsHolding(` AND r.namespace = $3 AND ($4 = '' OR r.user_id = ANY((SELECT loom.user_refs($1, $4))::text[]))`),
		org, refs, ns, user)
	if err != nil {
		return fmt.Errorf("read the sessions of %s's session-bound tokens: %w", ns, err)
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("read the sessions of %s's session-bound tokens: %w", ns, err)
	}
	for _, ref := range held {
		into[ref] = true
	}
	return nil
}

// end destroys the key of each token whose session is one of sessions and names no
// row of the org any more, once the step deleted its scope's rows, and answers how
// many tokens it ended.
func (tokens sessionTokens) end(ctx context.Context, tx pgx.Tx, org string, sessions map[string]bool) (int64, error) {
	if len(sessions) == 0 {
		return 0, nil
	}
	asked := make([]string, 0, len(sessions))
	for ref := range sessions {
		asked = append(asked, ref)
	}
	rows, err := tx.Query(ctx, sessionsHolding(""), org, asked)
	if err != nil {
		return 0, fmt.Errorf("read what the erased sessions still name: %w", err)
	}
	named, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("read what the erased sessions still name: %w", err)
	}
	left := map[string]bool{}
	for _, ref := range named {
		left[ref] = true
	}
	var ended []string
	for ref := range sessions {
		if !left[ref] {
			ended = append(ended, tokens[ref]...)
		}
	}
	if len(ended) == 0 {
		return 0, nil
	}
	tag, err := tx.Exec(ctx, `UPDATE loom.api_tokens SET read_session_key = NULL WHERE org = $1 AND token_id = ANY($2)`, org, ended)
	if err != nil {
		return 0, fmt.Errorf("end the erased sessions' tokens: %w", err)
	}
	return tag.RowsAffected(), nil
}

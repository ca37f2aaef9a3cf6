package evidence

// This file owns loom.memory_chunks and loom.memory_chunk_sources (migration 104): the
// verbatim chunks of the conversation's record and the turns each was cut from.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/rowseal"
)

// ChunkMaxWords is how many words a chunk holds at most. Consecutive turns of one call
// share a chunk while they fit; a turn longer than that is cut into parts at word
// boundaries, each a chunk of its own. The size is a passage a reader takes in at once
// (about what a knowledge chunk holds), so a hit's text shows what matched without the
// whole conversation.
const ChunkMaxWords = 200

// ChunkTurn is a turn as the chunker reads it.
type ChunkTurn struct {
	TurnID       string
	Role         string
	Speaker      string
	Text         string
	MessageIndex int
	OccurredAt   time.Time
}

// ChunkCut is one chunk the chunker cut: its verbatim text, each turn led by who said
// it, and the turns it was cut from, in order.
type ChunkCut struct {
	Text                  string
	TurnIDs               []string
	FirstIndex, LastIndex int
	Part                  int // the part of a long turn (0 for whole turns)
	OccurredAt            time.Time
}

// who leads a turn's line: its speaker, else its role.
func who(t ChunkTurn) string {
	if strings.TrimSpace(t.Speaker) != "" {
		return t.Speaker
	}
	return t.Role
}

// wordStarts are the byte offsets where text's words begin.
func wordStarts(text string) []int {
	var out []int
	inWord := false
	for i, r := range text {
		space := unicode.IsSpace(r)
		if !space && !inWord {
			out = append(out, i)
		}
		inWord = !space
	}
	return out
}

// CutChunks cuts one session's turns, in order, into chunks of at most maxWords words:
// whole consecutive turns while they fit, and a longer turn in parts cut at the start
// of a word, its text kept as it was written.
func CutChunks(turns []ChunkTurn, maxWords int) []ChunkCut {
	var out []ChunkCut
	var cur *ChunkCut
	words := 0
	var lines []string
	flush := func() {
		if cur != nil {
			cur.Text = strings.Join(lines, "\n")
			out = append(out, *cur)
		}
		cur, words, lines = nil, 0, nil
	}
	for _, t := range turns {
		starts := wordStarts(t.Text)
		n := len(starts)
		if n > maxWords {
			flush()
			for part, from := 0, 0; from < n; part, from = part+1, from+maxWords {
				end := len(t.Text)
				if from+maxWords < n {
					end = starts[from+maxWords]
				}
				piece := strings.TrimRightFunc(t.Text[starts[from]:end], unicode.IsSpace)
				out = append(out, ChunkCut{Text: who(t) + ": " + piece, TurnIDs: []string{t.TurnID},
					FirstIndex: t.MessageIndex, LastIndex: t.MessageIndex, Part: part, OccurredAt: t.OccurredAt})
			}
			continue
		}
		if cur != nil && words+n > maxWords {
			flush()
		}
		if cur == nil {
			cur = &ChunkCut{FirstIndex: t.MessageIndex, OccurredAt: t.OccurredAt}
		}
		cur.TurnIDs = append(cur.TurnIDs, t.TurnID)
		cur.LastIndex = t.MessageIndex
		words += n
		lines = append(lines, who(t)+": "+t.Text)
	}
	flush()
	return out
}

// sealedChunk is what a chunk's row seals: its agent and session (the columns hold
// their references, migration 176) and its text.
type sealedChunk struct {
	Agent   string `json:"agent"`
	Session string `json:"session"`
	Text    string `json:"text"`
}

// SealChunk seals a chunk's agent, session and text under its data key (unwrapped),
// as pgcrypto's decrypt(…, hmac('loom.chunk', key, 'sha256'), 'aes') opens it.
func SealChunk(dataKey []byte, agent, session, text string) ([]byte, error) {
	plain, err := json.Marshal(sealedChunk{Agent: agent, Session: session, Text: text})
	if err != nil {
		return nil, fmt.Errorf("encode the chunk's text: %w", err)
	}
	out, err := rowseal.Seal(dataKey, rowseal.LabelChunk, plain)
	if err != nil {
		return nil, fmt.Errorf("seal the chunk's text: %w", err)
	}
	return out, nil
}

// Chunk is one chunk as the write side queues it: the data key as stored (wrapped
// under the KEK) and the text sealed under it (SealChunk).
type Chunk struct {
	Org, Namespace, ChunkID  string
	Agent, UserID, SessionID string
	FirstIndex, LastIndex    int
	Part                     int
	OccurredAt               time.Time
	Seq                      int64
	Source                   string
	DataKey, Sealed          []byte
	TurnIDs                  []string
}

// QueueInsertChunks queues the insert of chunks and of their lineage, in two
// statements over arrays whatever the number of chunks.
func QueueInsertChunks(b *pgx.Batch, chunks []Chunk) {
	if len(chunks) == 0 {
		return
	}
	n := len(chunks)
	orgs, nss, ids, agents, users, sessions := make([]string, n), make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n)
	firsts, lasts, parts, seqs, ats, sources := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n),
		make([]time.Time, n), make([]string, n)
	keys, sealed := make([][]byte, n), make([][]byte, n)
	var srcChunks, srcTurns, srcUsers, srcOrgs, srcNss []string
	var srcPositions, srcSeqs []int64
	for i, c := range chunks {
		orgs[i], nss[i], ids[i], agents[i], users[i], sessions[i] = c.Org, c.Namespace, c.ChunkID, c.Agent, c.UserID, c.SessionID
		firsts[i], lasts[i], parts[i], seqs[i], ats[i], sources[i] = int64(c.FirstIndex), int64(c.LastIndex), int64(c.Part), c.Seq, c.OccurredAt, c.Source
		keys[i], sealed[i] = c.DataKey, c.Sealed
		for pos, t := range c.TurnIDs {
			srcOrgs, srcNss, srcChunks, srcTurns = append(srcOrgs, c.Org), append(srcNss, c.Namespace), append(srcChunks, c.ChunkID), append(srcTurns, t)
			srcPositions, srcUsers, srcSeqs = append(srcPositions, int64(pos)), append(srcUsers, c.UserID), append(srcSeqs, c.Seq)
		}
	}
	b.Queue(`WITH t AS (SELECT * FROM unnest($1::text[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::bigint[],
			$9::bigint[], $10::timestamptz[], $11::bigint[], $12::text[], $13::bytea[], $14::bytea[])
			AS c(org, namespace, chunk_id, agent, user_id, session_id, first_index, last_index, part, occurred_at, seq, source, data_key, sealed))`+namedUsers+writerRefs+`
		INSERT INTO loom.memory_chunks (org, namespace, chunk_id, agent, user_id, session_id, first_index, last_index,
			part, occurred_at, seq, source, data_key, sealed)
		SELECT t.org, t.namespace, t.chunk_id, w.r[2], n.ref, w.r[3], t.first_index, t.last_index,
			t.part, t.occurred_at, t.seq, t.source, t.data_key, t.sealed
		FROM t JOIN n ON n.org = t.org AND n.user_id = t.user_id
			JOIN w ON w.org = t.org AND w.agent = t.agent AND w.session_id = t.session_id`,
		orgs, nss, ids, agents, users, sessions, firsts, lasts, parts, ats, seqs, sources, keys, sealed)
	if len(srcTurns) == 0 {
		return
	}
	b.Queue(`WITH t AS (SELECT * FROM unnest($1::text[], $2::text[], $3::uuid[], $4::uuid[], $5::bigint[], $6::text[], $7::bigint[])
			AS s(org, namespace, chunk_id, turn_id, position, user_id, seq))`+namedUsers+`
		INSERT INTO loom.memory_chunk_sources (org, namespace, chunk_id, turn_id, position, user_id, seq)
		SELECT t.org, t.namespace, t.chunk_id, t.turn_id, t.position, n.ref, t.seq
		FROM t JOIN n ON n.org = t.org AND n.user_id = t.user_id`,
		srcOrgs, srcNss, srcChunks, srcTurns, srcPositions, srcUsers, srcSeqs)
}

// OpenedChunk is a kept chunk, its text opened.
type OpenedChunk struct {
	ChunkID               string
	Agent                 string
	UserID                string
	SessionID             string
	FirstIndex, LastIndex int
	Part                  int
	OccurredAt            time.Time
	Text                  string
}

// RecentChunks reads the scope's most recent chunks, at most limit, newest first: the
// chunks a search's turns leg matches against (its stage 1; ChunkTurns reads the
// lineage of the few it serves).
// The rows come sealed, and unwrap opens each data key in Go (kek.Ring.Unwrap): a
// search opens hundreds of chunks, and loom.unwrapped_key, run once a row in SQL, cost
// seconds for 2,000 of them where Go's AES takes milliseconds. A chunk whose key does
// not open is an error.
func RecentChunks(ctx context.Context, q Querier, s Scope, limit int, unwrap func([]byte) ([]byte, error)) ([]OpenedChunk, error) {
	// Each user is named once (the column holds the reference, migration 155).
	rows, err := q.Query(ctx, `WITH recent AS (SELECT c.chunk_id, c.agent, c.user_id, c.session_id, c.first_index, c.last_index, c.part,
			c.occurred_at, c.data_key, c.sealed
		FROM loom.memory_chunks c
		WHERE c.org = $1 AND c.namespace = $2 AND ($3 = '' OR c.user_id = (SELECT loom.user_ref($1, $3)))
		ORDER BY c.occurred_at DESC, c.first_index DESC, c.part DESC LIMIT $4),
		names AS (SELECT u.user_id, loom.user_name($1, u.user_id) AS name FROM (SELECT DISTINCT user_id FROM recent) u)
		SELECT r.chunk_id::text, r.agent, n.name, r.session_id, r.first_index, r.last_index, r.part, r.occurred_at, r.data_key, r.sealed
		FROM recent r JOIN names n USING (user_id)
		ORDER BY r.occurred_at DESC, r.first_index DESC, r.part DESC`, s.Org, s.Namespace, s.UserID, limit)
	if err != nil {
		return nil, fmt.Errorf("read the recent chunks: %w", err)
	}
	defer rows.Close()
	var out []OpenedChunk
	for rows.Next() {
		var c OpenedChunk
		var stored, sealed []byte
		var agentRef, sessionRef string
		if err := rows.Scan(&c.ChunkID, &agentRef, &c.UserID, &sessionRef, &c.FirstIndex, &c.LastIndex, &c.Part,
			&c.OccurredAt, &stored, &sealed); err != nil {
			return nil, fmt.Errorf("read the recent chunks: %w", err)
		}
		key, err := unwrap(stored)
		if err != nil {
			return nil, fmt.Errorf("open chunk %s's key: %w", c.ChunkID, err)
		}
		plain, err := rowseal.Open(key, rowseal.LabelChunk, sealed)
		if err != nil {
			return nil, fmt.Errorf("open chunk %s: %w", c.ChunkID, err)
		}
		var sc sealedChunk
		if err := json.Unmarshal(plain, &sc); err != nil {
			return nil, fmt.Errorf("decode chunk %s: %w", c.ChunkID, err)
		}
		c.Agent, c.SessionID, c.Text = sc.Agent, sc.Session, sc.Text
		out = append(out, c)
	}
	return out, rows.Err()
}

// ChunkTurns reads the turns chunks were cut from, in order: chunk id → turn ids.
func ChunkTurns(ctx context.Context, q Querier, org, ns string, chunkIDs []string) (map[string][]string, error) {
	rows, err := q.Query(ctx, `SELECT chunk_id::text, array_agg(turn_id::text ORDER BY position) FROM loom.memory_chunk_sources
		WHERE org = $1 AND namespace = $2 AND chunk_id = ANY($3::uuid[]) GROUP BY chunk_id`, org, ns, chunkIDs)
	if err != nil {
		return nil, fmt.Errorf("read the chunks' turns: %w", err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var id string
		var turns []string
		if err := rows.Scan(&id, &turns); err != nil {
			return nil, fmt.Errorf("read the chunks' turns: %w", err)
		}
		out[id] = turns
	}
	return out, rows.Err()
}

// NewestDigests reads the newest digest of each of the scope's sessions, at most
// limit sessions, the most recently digested first: the digests a search's digest leg
// matches against. Each is opened in Go with unwrap, as RecentChunks' chunks are.
func NewestDigests(ctx context.Context, q Querier, s Scope, limit int, unwrap func([]byte) ([]byte, error)) ([]OpenedDigest, error) {
	rows, err := q.Query(ctx, `SELECT * FROM (SELECT DISTINCT ON (d.user_id, d.session_id) loom.user_name(d.org, d.user_id), d.session_id, d.window_end,
			d.turns, d.model, d.created_at, d.data_key, d.sealed
		FROM loom.session_summaries d
		WHERE d.org = $1 AND d.namespace = $2 AND ($3 = '' OR d.user_id = (SELECT loom.user_ref($1, $3)))
		ORDER BY d.user_id, d.session_id, d.window_end DESC) n ORDER BY created_at DESC LIMIT $4`,
		s.Org, s.Namespace, s.UserID, limit)
	if err != nil {
		return nil, fmt.Errorf("read the sessions' digests: %w", err)
	}
	var out []OpenedDigest
	err = openDigests(rows, unwrap, nil, func(d OpenedDigest) error {
		out = append(out, d)
		return nil
	})
	return out, err
}

// EachDigestOf calls fn with every kept digest of one user in the org's namespaces
// (nil: every one), by namespace, session and window: a subject-access export's read.
// The column holds the session's reference (migration 176), so a namespace's digests
// (one a session, the newest superseding the ones before) are put in the sessions'
// order in Go, a namespace at a time.
func EachDigestOf(ctx context.Context, q Querier, org, userID string, namespaces []string, unwrap func([]byte) ([]byte, error),
	fn func(ns string, d OpenedDigest) error) error {
	rows, err := q.Query(ctx, `SELECT d.namespace, loom.user_name(d.org, d.user_id), d.session_id, d.window_end, d.turns, d.model, d.created_at, d.data_key, d.sealed
		FROM loom.session_summaries d WHERE d.org = $1 AND d.user_id = (SELECT loom.user_ref($1, $2)) AND ($3::text[] IS NULL OR d.namespace = ANY($3))
		ORDER BY d.namespace`, org, userID, namespaces)
	if err != nil {
		return fmt.Errorf("read the user's digests: %w", err)
	}
	var ns, held string
	var batch []OpenedDigest
	flush := func() error {
		slices.SortFunc(batch, func(a, b OpenedDigest) int {
			if c := strings.Compare(a.SessionID, b.SessionID); c != 0 {
				return c
			}
			return a.WindowEnd - b.WindowEnd
		})
		for _, d := range batch {
			if err := fn(held, d); err != nil {
				return err
			}
		}
		batch = batch[:0]
		return nil
	}
	err = openDigests(rows, unwrap, []any{&ns}, func(d OpenedDigest) error {
		if ns != held {
			if err := flush(); err != nil {
				return err
			}
			held = ns
		}
		batch = append(batch, d)
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// openDigests reads rows of a digest's columns after lead, opens each digest in Go
// with unwrap and hands it to add.
func openDigests(rows pgx.Rows, unwrap func([]byte) ([]byte, error), lead []any, add func(OpenedDigest) error) error {
	defer rows.Close()
	for rows.Next() {
		var d OpenedDigest
		var stored, sealed []byte
		var sessionRef string
		dest := append(slices.Clone(lead), &d.UserID, &sessionRef, &d.WindowEnd, &d.Turns, &d.Model, &d.CreatedAt, &stored, &sealed)
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("read the sessions' digests: %w", err)
		}
		key, err := unwrap(stored)
		if err != nil {
			return fmt.Errorf("open the key of session %s's digest: %w", sessionRef, err)
		}
		plain, err := rowseal.Open(key, rowseal.LabelDigest, sealed)
		if err != nil {
			return fmt.Errorf("open session %s's digest: %w", sessionRef, err)
		}
		if err := openDigest(&d, plain); err != nil {
			return err
		}
		if err := add(d); err != nil {
			return err
		}
	}
	return rows.Err()
}

// QueueHasTurns queues the read of whether any of the namespaces holds a kept turn in
// scope: a search runs its turns and digest legs only then.
func QueueHasTurns(b *pgx.Batch, org string, namespaces []string, userID string, into *bool) {
	b.Queue(`SELECT EXISTS (SELECT 1 FROM loom.memory_evidence WHERE org = $1 AND namespace = ANY($2)
		AND ($3 = '' OR user_id = (SELECT loom.user_ref($1, $3))))`, org, namespaces, userID).QueryRow(func(r pgx.Row) error { return r.Scan(into) })
}

// Package idempotency runs a write under its Idempotency-Key, for every plane that
// writes (command/ for memory, knowledge/command for documents), and owns every
// statement of loom.idempotency. It knows no role: a writer tells it what its answers
// mean (Options) and marks its key in its own commit's transaction.
//
// A key is a row of loom.idempotency, keyed by the org and a hash of the token, the
// operation and the key. A request holds it under a lease and a token; its commit
// marks it (committed, or done with its answer) in the same transaction as what it
// writes, and only under that token, so a request a retry took over can no longer
// commit. The answers follow the table of schemas/openapi.yaml (parameter
// IdempotencyKey).
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/rowseal"
)

// Codes of the idempotency table.
const (
	CodeConflict   = "IDEMPOTENT_CONFLICT"    // 409: the key was used for another request
	CodeInProgress = "IDEMPOTENT_IN_PROGRESS" // 503: the key's request is still running
	CodeTakenOver  = "IDEMPOTENT_TAKEN_OVER"  // 503: a retry took this request's key over
)

const (
	stateRunning   = "running"
	stateCommitted = "committed"
	stateDone      = "done"
	stateErased    = "erased" // an erasure removed something the request wrote
	keep           = 24 * time.Hour
	maxKeyLen      = 255
	// lockWait bounds how long a claim waits for its key's row lock: a row locked
	// longer is held by a request that is still deciding, or by an erasure's fence
	// (QueueFenceErased), and the seeds answer 503 IDEMPOTENT_IN_PROGRESS, which the
	// client retries, rather than wait.
	lockWait = 250 * time.Millisecond
)

// ErrTakenOver is a commit's mark refused: a retry took over the request's key.
var ErrTakenOver = errors.New("a retry took over this request's idempotency key")

// TakenOver is the answer of a request whose commit ErrTakenOver refused.
func TakenOver(cause error) *httperr.Error {
	return httperr.Unavailable(CodeTakenOver, "a retry with the same Idempotency-Key took this request over; nothing was committed", cause)
}

// Key is what an Idempotency-Key covers: the key, the token that sent it, the
// operation, and the request it came with (method, URL and body), which a retry must
// repeat.
type Key struct {
	Key     string
	P       auth.Principal
	Op      string
	Request string
}

// KeyOf is the key of the request c, sent by p, of the operation op.
func KeyOf(c *fiber.Ctx, p auth.Principal, op string) Key {
	return Key{Key: c.Get("Idempotency-Key"), P: p, Op: op, Request: c.Method() + " " + c.OriginalURL() + "\x00" + string(c.Body())}
}

// Hold is a request's hold on its key (nil: the request has none).
type Hold struct {
	org     string
	keyHash []byte
	token   int64
	key     []byte // the claim's data key, which seals its answer and revisions
	stored  bool   // its commit stored the answer (MarkDone)
	// committed: its commit marked it committed with its revisions (MarkCommitted), so
	// the answer stored after it may be lost without losing the replay.
	committed bool
}

// Reply is what a write answers: its answer, and under an Idempotency-Key the
// answer's JSON as stored (Replay: from an earlier run of the request).
type Reply struct {
	Answer any
	Body   []byte // nil: the request had no key; answer Answer
	Replay bool
}

// Options is what a writer tells the store about its answers.
type Options struct {
	// Lease is how long a request holds its key (LOOM_PG_REQUEST_LEASE_SECONDS).
	Lease time.Duration
	// Committed reports whether an answer committed anything; one that did not (a
	// merge, a dry run, an upsert of the head's own content) releases its key, so a
	// retry judges again. nil: every answer committed.
	Committed func(answer any) bool
	// ReplayCommitted answers a request that committed (MarkCommitted) but did not
	// store its answer, from the revisions its commit recorded. nil: the writer never
	// marks a key committed.
	ReplayCommitted func(revisions []byte) ([]byte, error)
	// Keys wraps the data key each claim seals its answer under (nil: the deployment
	// has no KEK, and stores it raw).
	Keys *kek.Ring
}

// Store runs writes under their keys, over loom.idempotency.
type Store struct {
	pool *pgxpool.Pool
	opts Options
	log  *slog.Logger
}

// New is the store of the keys in pool.
func New(pool *pgxpool.Pool, opts Options, log *slog.Logger) *Store {
	if opts.Lease <= 0 {
		opts.Lease = time.Minute
	}
	return &Store{pool: pool, opts: opts, log: log}
}

// Run runs a write under its Idempotency-Key, when the request has one: a replay
// answers the stored answer; otherwise run runs with the hold its commit marks.
func (s *Store) Run(ctx context.Context, k Key, run func(hold *Hold) (any, error)) (Reply, error) {
	if k.Key == "" {
		ans, err := run(nil)
		return Reply{Answer: ans}, err
	}
	if len(k.Key) > maxKeyLen {
		return Reply{}, httperr.Validation("Idempotency-Key", "the Idempotency-Key header is longer than 255 characters")
	}
	if err := memrow.CheckText("Idempotency-Key", k.Key); err != nil {
		return Reply{}, err
	}
	keyHash := sha256.Sum256([]byte("v3\x00" + k.P.Org + "\x00" + k.P.TokenID + "\x00" + k.Op + "\x00" + k.Key))
	digest := sha256.Sum256([]byte(k.Request))
	hold, replay, err := s.claim(ctx, k.P.Org, keyHash[:], k.Op, digest[:])
	if err != nil {
		return Reply{}, err
	}
	if replay != nil {
		return Reply{Body: replay, Replay: true}, nil
	}
	ans, err := run(hold)
	if err != nil {
		// A request that answers without committing lets a retry run at once; one
		// whose commit's outcome is unknown keeps the key, which a retry replays.
		if !errors.Is(err, pg.ErrOutcomeUnknown) {
			s.release(ctx, hold)
		}
		return Reply{}, err
	}
	body, err := json.Marshal(ans)
	if err != nil {
		return Reply{}, err
	}
	switch {
	case s.opts.Committed != nil && !s.opts.Committed(ans):
		s.release(ctx, hold)
	case hold.stored:
	default:
		if err := s.storeAnswer(ctx, hold, body); err != nil {
			s.log.Warn("idempotency: cannot store the answer; a retry will replay the committed revisions", "err", err)
		}
	}
	return Reply{Answer: ans, Body: body}, nil
}

// storedRow is what a key's row keeps for a replay: its answer and revisions, each
// sealed under the claim's key or (stored before migration 156) plain.
type storedRow struct {
	key                           []byte
	answer, revisions             []byte
	answerSealed, revisionsSealed bool
}

// opened is a stored answer or revisions as JSON: opened under the row's key when
// sealed.
func (s *Store) opened(storedKey, text []byte, sealed bool, label string) ([]byte, error) {
	if !sealed {
		return text, nil
	}
	key, err := kek.OpenKey(s.opts.Keys, storedKey)
	if err != nil {
		return nil, fmt.Errorf("open the stored answer's key: %w", err)
	}
	return rowseal.Open(key, label, text)
}

func lockTimedOut(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

func inProgress() *httperr.Error {
	return httperr.Unavailable(CodeInProgress, "a request with this Idempotency-Key is still running; retry", nil)
}

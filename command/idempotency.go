package command

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/pg"
)

// An Idempotency-Key is a row of loom.idempotency, keyed by the org and a hash of the
// token, the operation and the key. A request holds it under a lease and a token; its
// commit marks it committed in the same transaction as the revisions, and only under
// that token, so a request a retry took over can no longer commit.

// Codes of the idempotency table.
const (
	CodeIdempotentConflict   = "IDEMPOTENT_CONFLICT"    // 409: the key was used for another request
	CodeIdempotentInProgress = "IDEMPOTENT_IN_PROGRESS" // 503: the key's request is still running
	CodeIdempotentTakenOver  = "IDEMPOTENT_TAKEN_OVER"  // 503: a retry took this request's key over
)

const (
	idemRunning   = "running"
	idemCommitted = "committed"
	idemDone      = "done"
	idemErased    = "erased" // an erasure removed a memory the request wrote
	idemKeep      = 24 * time.Hour
	maxIdemKeyLen = 255
)

// idemHold is a request's hold on its key.
type idemHold struct {
	org     string
	keyHash []byte
	token   int64
}

// committedRevision is what a replay of a committed request names.
type committedRevision struct {
	MemoryID      string `json:"memory_id"`
	MemoryKey     string `json:"memory_key"`
	Version       int64  `json:"version"`
	VersionText   string `json:"version_text"`
	ContentSHA256 string `json:"content_sha256"`
}

var errTakenOver = errors.New("a retry took over this request's idempotency key")

// origin is what a write carries from its request to its commit: the request id its
// audit rows name, and its hold on its Idempotency-Key (nil without one), which the
// commit marks committed.
type origin struct {
	requestID string
	hold      *idemHold
}

// writeAnswer is what a write answers. A write that committed nothing (a merge, a dry
// run, a pin of a pinned row) releases its Idempotency-Key, so a retry judges again.
type writeAnswer interface {
	committed() bool
	outcome() string // the metrics label
}

// idemKey is what an Idempotency-Key covers: the key, the token that sent it, the
// operation, and the request it came with (method, URL and body), which a retry must
// repeat.
type idemKey struct {
	key     string
	p       auth.Principal
	op      string
	request string
}

// reply is what a write answers: its answer, or under an Idempotency-Key the answer's
// JSON as stored (replay: from an earlier run of the request).
type reply struct {
	ans    any
	body   []byte
	replay bool
}

// idempotent runs a write under its Idempotency-Key, when the request has one.
func (s *Service) idempotent(ctx context.Context, k idemKey, run func(hold *idemHold) (any, error)) (reply, error) {
	if k.key == "" {
		ans, err := run(nil)
		return reply{ans: ans}, err
	}
	if len(k.key) > maxIdemKeyLen {
		return reply{}, httperr.Validation("Idempotency-Key", "the Idempotency-Key header is longer than 255 characters")
	}
	if err := memrow.CheckText("Idempotency-Key", k.key); err != nil {
		return reply{}, err
	}
	keyHash := sha256.Sum256([]byte("v3\x00" + k.p.Org + "\x00" + k.p.TokenID + "\x00" + k.op + "\x00" + k.key))
	digest := sha256.Sum256([]byte(k.request))
	hold, replay, err := s.claim(ctx, k.p.Org, keyHash[:], k.op, digest[:])
	if err != nil {
		return reply{}, err
	}
	if replay != nil {
		return reply{body: replay, replay: true}, nil
	}
	ans, err := run(hold)
	if err != nil {
		// A request that answers without committing lets a retry run at once; one
		// whose commit's outcome is unknown keeps the key, which a retry replays.
		if !errors.Is(err, pg.ErrOutcomeUnknown) {
			s.release(ctx, hold)
		}
		return reply{}, err
	}
	body, err := json.Marshal(ans)
	if err != nil {
		return reply{}, err
	}
	if wa, ok := ans.(writeAnswer); ok && !wa.committed() {
		s.release(ctx, hold)
		return reply{body: body}, nil
	}
	if err := s.storeAnswer(ctx, hold, body); err != nil {
		s.log.Warn("idempotency: cannot store the answer; a retry will replay the committed revisions", "err", err)
	}
	return reply{body: body}, nil
}

// claim takes the key, or answers from it, as the table of schemas/openapi.yaml
// (parameter IdempotencyKey) says: none or expired → run; another digest → 409; erased
// (an erasure removed a revision it committed) → 404 for the whole request; done → the
// stored answer; running or committed under a live lease → 503; committed with the
// lease over → the committed revisions; running with the lease over → run under the
// next token.
func (s *Service) claim(ctx context.Context, org string, keyHash []byte, op string, digest []byte) (*idemHold, []byte, error) {
	lease := s.cfg.IdempotencyLease
	var hold *idemHold
	var replay []byte
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var token int64
		// A key's row locked past idemLockWait is held by a request that is still
		// deciding, or by an erasure's fence (idempotency_store.go): the seeds answer
		// 503 IDEMPOTENT_IN_PROGRESS, which the client retries, rather than wait.
		b := &pgx.Batch{}
		b.Queue(`SELECT set_config('lock_timeout', $1, true)`, fmt.Sprintf("%dms", idemLockWait.Milliseconds()))
		b.Queue(idemInsertSQL, org, keyHash, op, digest, lease.String(), idemKeep.String())
		br := tx.SendBatch(ctx, b)
		_, err := br.Exec()
		if err == nil {
			err = br.QueryRow().Scan(&token)
		}
		if cerr := br.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err == nil {
			hold = &idemHold{org: org, keyHash: keyHash, token: token}
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		var storedDigest, answer, revisions []byte
		var state string
		var leaseLive, expired bool
		err = tx.QueryRow(ctx, idemLockSQL, org, keyHash).
			Scan(&storedDigest, &state, &leaseLive, &expired, &token, &answer, &revisions)
		if err != nil {
			return err
		}
		takeOver := func() error {
			err := tx.QueryRow(ctx, idemTakeOverSQL, org, keyHash, op, digest, lease.String(), expired, idemKeep.String()).Scan(&token)
			hold = &idemHold{org: org, keyHash: keyHash, token: token}
			return err
		}
		switch {
		case expired:
			return takeOver()
		case string(storedDigest) != string(digest):
			return httperr.New(http.StatusConflict, CodeIdempotentConflict, "the Idempotency-Key was used for another request")
		case state == idemErased:
			return httperr.NotFound("a memory this request wrote was erased since")
		case state == idemDone:
			replay = answer
			return nil
		case leaseLive:
			return inProgress()
		case state == idemCommitted:
			replay, err = committedReplay(revisions)
			return err
		default: // running, its lease over: its request died before committing
			return takeOver()
		}
	})
	if err != nil {
		var he *httperr.Error
		if errors.As(err, &he) {
			return nil, nil, he
		}
		if lockTimedOut(err) {
			return nil, nil, inProgress()
		}
		return nil, nil, httperr.Store("claiming the Idempotency-Key", err)
	}
	return hold, replay, nil
}

// idemLockWait bounds how long a claim waits for its key's row lock.
const idemLockWait = 250 * time.Millisecond

func lockTimedOut(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

func inProgress() *httperr.Error {
	return httperr.Unavailable(CodeIdempotentInProgress, "a request with this Idempotency-Key is still running; retry", nil)
}

func committedReplay(revisions []byte) ([]byte, error) {
	var revs []committedRevision
	if err := json.Unmarshal(revisions, &revs); err != nil {
		return nil, fmt.Errorf("decode committed revisions: %w", err)
	}
	ans := map[string]any{"idempotent_replay": "committed", "written": revs}
	if len(revs) > 0 {
		ans["memory_id"], ans["memory_key"], ans["version"] = revs[0].MemoryID, revs[0].MemoryKey, revs[0].Version
		ans["version_text"], ans["content_sha256"] = revs[0].VersionText, revs[0].ContentSHA256
	}
	return json.Marshal(ans)
}

// markCommitted marks the key committed in the commit's transaction, under the
// request's token only.
func markCommitted(ctx context.Context, tx pgx.Tx, hold *idemHold, rows []*pending) error {
	var revs []committedRevision
	for _, p := range rows {
		if !p.own {
			continue
		}
		r := p.row
		revs = append(revs, committedRevision{MemoryID: r.MemoryID, MemoryKey: r.MemoryKey, Version: r.Version,
			VersionText: memrow.VersionText(r.Version), ContentSHA256: r.ContentSHA256})
	}
	raw, err := json.Marshal(revs)
	if err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, idemCommittedSQL, hold.org, hold.keyHash, hold.token, raw)
	if err != nil {
		return fmt.Errorf("mark the Idempotency-Key committed: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return errTakenOver
	}
	return nil
}

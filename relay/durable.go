package relay

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Only durable revisions are published. A commit whose wait for the synchronous
// standbys was cut (a client deadline: pgx sends a cancel request when it drops a
// connection; an operator's pg_cancel_backend or pg_terminate_backend; a shutdown)
// is committed on the primary alone and visible there at once. A failover loses it,
// and the new primary numbers another revision with its seq: published, it would make
// every consumer that dedupes by seq drop the real one.
//
// So with synchronous durability a round reads its batch, then the primary's WAL
// position, on the relay's lock session, and publishes the batch only once the
// synchronous standbys have flushed WAL up to that position. A row is visible only
// after its commit record was written, so the position read after the batch is at or
// past every commit the batch saw; a row committed later is not in the batch and is
// checked with the next one. Flushed, not replayed: promotion replays every flushed
// record before the standby serves, and replay only says what its readers see. The
// check does not wait in Postgres, say behind a commit of its own: no timeout bounds
// a commit's standby wait, and a cancelled one answers success with a warning, which
// would read as durable. It polls pg_stat_replication for DurableWait, then ends the
// round with the batch held and tries again next round. Everything on one session means the batch, the position and
// the standbys' progress all come from the same server.

// Hold reasons, as metrics and health name them.
const (
	HoldStandbyDetached = "standby_detached"         // fewer synchronous standbys stream than synchronous_standby_names needs
	HoldStandbyBehind   = "standby_behind"           // they stream, but have not flushed the batch yet
	HoldStatsHidden     = "replication_stats_hidden" // this role may not read pg_stat_replication's positions (grant pg_monitor)
)

var holdReasons = []string{HoldStandbyDetached, HoldStandbyBehind, HoldStatsHidden}

// standbyState is what pg_stat_replication says about the synchronous standbys and a
// WAL position at one moment.
type standbyState struct {
	names    string // synchronous_standby_names
	attached int    // standbys in sync or quorum state
	flushed  int    // of those, how many flushed the position
	hidden   int    // rows whose state this role may not see
}

// holdReason is why a batch read up to a WAL position may not be published yet, or
// "" when the synchronous standbys hold it: at least as many standbys in the
// synchronous set flushed it as synchronous_standby_names asks for. Under FIRST n
// pg_stat_replication marks the n chosen standbys sync, under ANY n every candidate
// quorum, so "n of the sync or quorum standbys flushed it" is Postgres's own release
// rule for both.
func holdReason(s standbyState) string {
	need := syncStandbysNeeded(s.names)
	switch {
	case s.flushed >= need:
		return ""
	case s.hidden > 0:
		return HoldStatsHidden
	case s.attached < need:
		return HoldStandbyDetached
	}
	return HoldStandbyBehind
}

var syncCount = regexp.MustCompile(`(?i)^\s*(?:(?:first|any)\s+)?(\d+)\s*\(`)

// syncStandbysNeeded is how many standbys must confirm a commit under
// synchronous_standby_names: "FIRST n (…)", "ANY n (…)" and "n (…)" name n; a plain
// list or "*" means one; empty means none (no commit waits for a standby).
func syncStandbysNeeded(names string) int {
	if strings.TrimSpace(names) == "" {
		return 0
	}
	if m := syncCount.FindStringSubmatch(names); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			return n
		}
	}
	return 1
}

const standbysSQL = `SELECT current_setting('synchronous_standby_names'),
	count(*) FILTER (WHERE sync_state IN ('sync', 'quorum'))::int,
	count(*) FILTER (WHERE sync_state IN ('sync', 'quorum') AND flush_lsn >= l.lsn)::int,
	count(*) FILTER (WHERE pid IS NOT NULL AND sync_state IS NULL)::int`

// readPosition reads the primary's WAL position and the standbys' state at it.
func readPosition(ctx context.Context, conn *pgxpool.Conn) (string, standbyState, error) {
	var lsn string
	var s standbyState
	err := conn.QueryRow(ctx, `WITH l AS MATERIALIZED (SELECT pg_current_wal_lsn() AS lsn) `+standbysSQL+`, l.lsn::text
		FROM l LEFT JOIN pg_stat_replication ON true GROUP BY l.lsn`).
		Scan(&s.names, &s.attached, &s.flushed, &s.hidden, &lsn)
	if err != nil {
		return "", s, fmt.Errorf("read the WAL position and the synchronous standbys: %w", err)
	}
	return lsn, s, nil
}

// readStandbys reads the standbys' state at a WAL position read before.
func readStandbys(ctx context.Context, conn *pgxpool.Conn, lsn string) (standbyState, error) {
	var s standbyState
	err := conn.QueryRow(ctx, `WITH l AS (SELECT $1::pg_lsn AS lsn) `+standbysSQL+`
		FROM l LEFT JOIN pg_stat_replication ON true GROUP BY l.lsn`, lsn).
		Scan(&s.names, &s.attached, &s.flushed, &s.hidden)
	if err != nil {
		return s, fmt.Errorf("read the synchronous standbys' positions: %w", err)
	}
	return s, nil
}

// errHeld ends a round whose batch the synchronous standbys do not hold yet: nothing
// of it was published, and the next round reads it again.
type errHeld struct {
	reason string
	rows   int
	lsn    string
}

func (e *errHeld) Error() string {
	return fmt.Sprintf("%d outbox rows held until the synchronous standbys flush WAL %s (%s)", e.rows, e.lsn, e.reason)
}

// awaitDurable returns once the synchronous standbys flushed the WAL position read
// after the batch of n rows, or an *errHeld when they have not within DurableWait.
func (r *Relay) awaitDurable(ctx context.Context, conn *pgxpool.Conn, n int) error {
	lsn, s, err := readPosition(ctx, conn)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(r.cfg.DurableWait)
	pause := 10 * time.Millisecond
	for {
		reason := holdReason(s)
		if reason == "" {
			return nil
		}
		if !time.Now().Before(deadline) {
			return &errHeld{reason: reason, rows: n, lsn: lsn}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(pause, time.Until(deadline))):
		}
		pause = min(2*pause, 200*time.Millisecond)
		if s, err = readStandbys(ctx, conn, lsn); err != nil {
			return err
		}
	}
}

// Hold is what the relay holds back from the topic because the synchronous standbys
// do not hold it yet; the zero Hold holds nothing.
type Hold struct {
	Rows   int       `json:"held_rows"`
	Reason string    `json:"reason,omitempty"`
	LSN    string    `json:"wal_lsn,omitempty"`
	Since  time.Time `json:"since,omitzero"`
}

// holdState keeps the current Hold for health and metrics, and logs where a hold
// begins and ends rather than every round.
type holdState struct {
	mu  sync.Mutex
	cur Hold
}

// Held reports what the relay holds back now.
func (r *Relay) Held() Hold {
	r.hold.mu.Lock()
	defer r.hold.mu.Unlock()
	return r.hold.cur
}

// resetHold forgets the current hold: the lock was lost or Run is starting.
func (r *Relay) resetHold() {
	r.hold.mu.Lock()
	r.hold.cur = Hold{}
	r.hold.mu.Unlock()
	for _, reason := range holdReasons {
		r.heldRows.With(reason).Set(0)
	}
}

// noteRound records a round's outcome: held (an *errHeld) or not.
func (r *Relay) noteRound(err error) {
	var held *errHeld
	isHeld := errors.As(err, &held)
	r.hold.mu.Lock()
	prev := r.hold.cur
	switch {
	case isHeld:
		r.hold.cur = Hold{Rows: held.rows, Reason: held.reason, LSN: held.lsn, Since: prev.Since}
		if prev.Since.IsZero() {
			r.hold.cur.Since = time.Now()
		}
	case err == nil:
		r.hold.cur = Hold{}
	}
	cur := r.hold.cur
	r.hold.mu.Unlock()
	for _, reason := range holdReasons {
		v := 0.0
		if reason == cur.Reason {
			v = float64(cur.Rows)
		}
		r.heldRows.With(reason).Set(v)
	}
	switch {
	case isHeld && (prev.Since.IsZero() || prev.Reason != cur.Reason):
		r.log.Warn("relay: holding outbox rows back until the synchronous standbys hold them",
			"rows", cur.Rows, "reason", cur.Reason, "wal_lsn", cur.LSN)
	case !isHeld && err == nil && !prev.Since.IsZero():
		r.log.Info("relay: the synchronous standbys hold the rows held back; publishing",
			"held_for", time.Since(prev.Since).Round(time.Millisecond))
	}
}

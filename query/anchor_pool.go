package query

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/text"
)

// The date anchor pool (memory-architecture memory.search step 5's additive pools): a
// question naming a day or a short span ("what did I do last Tuesday", "in March",
// "on 19 April 2023") is answered by rows said then, or said soon after and stating it
// ("home since yesterday"), that no leg may rank: the question's words are its date's.
// The date anchor (rank.go, anchorDates) lifts such rows when a leg found them; this
// pool adds those none found. It reads the heads said within each span, or up to
// anchorSaidWithin after it, from Postgres (migration 137's index on valid_at), keeps
// the ones the search serves that state an asked date (statesDate), and adds them to
// the pool. A row only this pool found scores as fuse scores a row every leg missed
// (0), plus the date anchor's weight, scaled by the share of the question's attribute
// words it holds: dateWeight when the question asks nothing but its date or the row
// holds every word it asks, half of it when it holds none.

const (
	// anchorMaxSpan: a longer span ("this year", "2023") dates too many rows to say
	// which answer; the lexical leg reads its year and months (dateTerms) instead.
	anchorMaxSpan = 31 * 24 * time.Hour
	// anchorSaidWithin: a row said this long after a span may state it ("last week",
	// "on Saturday", "a week ago").
	anchorSaidWithin = 14 * 24 * time.Hour
	// anchorPoolRows bounds the heads read per span and namespace: those said within the
	// span first, then the nearest after it.
	anchorPoolRows = 100
	// anchorMaxSpans bounds the spans read.
	anchorMaxSpans = 3
)

// anchorOutcome is what the date anchor pool did, as the explain block reports it.
type anchorOutcome struct {
	Status string      `json:"status"` // off (no short span asked), ran
	Spans  []dateRange `json:"spans,omitempty"`
	// Read are the heads read in the spans' windows; Added those the search serves
	// that state an asked date and no leg had found.
	Read  int `json:"read"`
	Added int `json:"added"`
}

// anchorSpans are the asked spans the pool reads: the short ones, at most anchorMaxSpans.
func anchorSpans(dates []dateRange) []dateRange {
	var out []dateRange
	for _, d := range dates {
		if d.To.Sub(d.From) <= anchorMaxSpan && len(out) < anchorMaxSpans {
			out = append(out, d)
		}
	}
	return out
}

// saidWithinSQL reads the live heads of a namespace said in [$3, $5), those said before
// $4 (the span's end) first, under the filter's agent, user and session (the columns
// hold their references: migrations 155, 173); the search's
// other filters are judged on the decoded heads, as validation judges them.
const saidWithinSQL = `SELECT ` + heads.Row + ` FROM loom.memory_current
	WHERE org = $1 AND namespace = $2 AND loom.head_valid_at(row) >= $3 AND loom.head_valid_at(row) < $5
	  AND loom.head_valid_at(row) IS NOT NULL AND NOT (row->>'tombstone')::boolean
	  AND ($6 = '' OR agent = (SELECT loom.agent_ref($1, $6)))
	  AND ((($7 = '' OR user_id = (SELECT loom.user_ref($1, $7))) AND ($8 = '' OR session_id = (SELECT loom.session_ref($1, $8))))
	    OR ($9 AND user_id = (SELECT loom.user_ref($1, $10))))
	ORDER BY loom.head_valid_at(row) >= $4, loom.head_valid_at(row) LIMIT $11`

// addAnchorPool adds to pool the rows said in the question's short spans, or stating
// them, that the search serves and no leg found; plan.anchor says what it did.
func (s *Service) addAnchorPool(ctx context.Context, plan *searchPlan, namespaces []string, pool []*candidate) ([]*candidate, error) {
	spans := anchorSpans(plan.query.Dates)
	if len(spans) == 0 || len(namespaces) == 0 {
		return pool, nil
	}
	plan.anchor.Status, plan.anchor.Spans = "ran", spans
	b := &pgx.Batch{}
	read := make([][]*memrow.Row, len(namespaces)*len(spans))
	f := plan.f
	for i, ns := range namespaces {
		for j, sp := range spans {
			into := &read[i*len(spans)+j]
			b.Queue(saidWithinSQL, f.org, ns, sp.From, sp.To, sp.To.Add(anchorSaidWithin), f.agent, f.userID, f.sessionID,
				f.shared, memrow.SharedUser, anchorPoolRows).Query(func(rows pgx.Rows) error {
				var err error
				*into, err = heads.Collect(rows)
				return err
			})
		}
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, httperr.Store("reading the heads said in the question's dates", fmt.Errorf("date anchor pool: %w", err))
	}
	seen := make(map[string]bool, len(pool))
	key := func(ns string, id memrow.Identity) string { return ns + "\x00" + heads.IdentityKey(id) }
	for _, c := range pool {
		seen[key(c.identity.Namespace, c.identity)] = true
	}
	now := s.now()
	var added []*candidate
	for _, rows := range read {
		plan.anchor.Read += len(rows)
		for _, h := range rows {
			k := key(h.Namespace, h.Identity)
			if seen[k] || !plan.serves(h, now) || !statesDate(h, plan.query.Dates) {
				continue
			}
			seen[k] = true
			score := dateWeight * (1 + attributeShare(h, plan.query.AttributeTerms)) / 2
			id := h.Identity
			id.Org = ""
			added = append(added, &candidate{identity: id, contentSHA256: h.ContentSHA256, memoryType: h.MemoryType,
				scores: dateScored(), fused: score, relevance: score})
		}
	}
	plan.anchor.Added += len(added)
	if len(added) == 0 {
		return pool, nil
	}
	pool = append(pool, added...)
	sortPool(pool)
	return pool, nil
}

// attributeShare is the share of the question's attribute terms a row's text holds; 1
// when the question asks nothing but its dates.
func attributeShare(h *memrow.Row, attribute []string) float64 {
	if len(attribute) == 0 {
		return 1
	}
	have := map[string]bool{}
	for _, t := range text.Terms(memrow.ValueText(h.Value)) {
		have[t] = true
	}
	n := 0
	for _, t := range attribute {
		if have[t] {
			n++
		}
	}
	return float64(n) / float64(len(attribute))
}

// reported is the outcome as the explain block says it: off unless the pool ran.
func (a anchorOutcome) reported() anchorOutcome {
	if a.Status == "" {
		a.Status = "off"
	}
	return a
}

// sessionDate is the date a search of one session reads its relative dates against
// when the request names no reference_time: the newest valid_at of the session's heads
// (an imported conversation's last turn), so "last Tuesday" asked in a session of
// 2023 means a Tuesday of 2023, not of the server's week. ok is false when the
// question states no relative date, the search is not of one session, or none of the
// session's heads is dated.
func (s *Service) sessionDate(ctx context.Context, org string, namespaces []string, f filter, req *searchRequest, q queryPlan) (time.Time, bool, error) {
	if req.ReferenceTime != nil || f.sessionID == "" || f.sessionID == noUser || !anyRelative(q.Dates) {
		return time.Time{}, false, nil
	}
	var at *time.Time
	err := s.pool.QueryRow(ctx, `SELECT max(loom.head_valid_at(row)) FROM loom.memory_current
		WHERE org = $1 AND namespace = ANY($2) AND session_id = (SELECT loom.session_ref($1, $3))
		  AND loom.head_valid_at(row) IS NOT NULL AND NOT (row->>'tombstone')::boolean`, org, namespaces, f.sessionID).Scan(&at)
	if err != nil {
		return time.Time{}, false, httperr.Store("reading the session's date", err)
	}
	if at == nil {
		return time.Time{}, false, nil
	}
	return at.UTC(), true, nil
}

func anyRelative(dates []dateRange) bool {
	for _, d := range dates {
		if d.Relative {
			return true
		}
	}
	return false
}

// dateScored is the scores of a row the anchor pool alone found: the date leg's.
func dateScored() legScores {
	var s legScores
	s.set(LegDate, 1)
	return s
}

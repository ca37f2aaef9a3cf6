package query

import (
	"context"
	"fmt"
	"time"

	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/text"
)

// What the leg sources' parity test (leg_source_parity_test.go, package query_test,
// which runs a loomd process over the real stores) reads of the package.

// Leg sources by the store they read.
const (
	SourceIndex      = sourceIndex
	SourceClickHouse = sourceClickHouse
)

// LegQuestion is one namespace's part of a search, as the parity test asks it.
type LegQuestion struct {
	Org, Namespace                       string
	Query                                string
	Agent, UserID, SessionID, MemoryType string
	Tags                                 []string
	TagsAny                              bool
	Statuses                             []memrow.Status // nil: those a search serves by default
	AsOf                                 *time.Time
	Limit                                int
}

// LegHit is one hit of a leg.
type LegHit struct {
	ID            memrow.Identity
	ContentSHA256 string
	MemoryType    string
	Score         float64
	Coverage      float64
}

// AskLegs asks one store's leg source q, its query embedded and cut into terms as a
// search does, with no fallback from one store to the other.
func (s *Service) AskLegs(ctx context.Context, store string, q LegQuestion) (map[Leg][]LegHit, error) {
	src := map[string]legSource{sourceIndex: s.indexLegs, sourceClickHouse: s.clickhouseLegs}[store]
	if src == nil {
		return nil, fmt.Errorf("no %s leg source in this process", store)
	}
	vec, err := s.embedQuery(ctx, q.Query)
	if err != nil {
		return nil, err
	}
	statuses := q.Statuses
	if statuses == nil {
		statuses = defaultStatuses
	}
	f := filter{org: q.Org, agent: q.Agent, userID: q.UserID, sessionID: q.SessionID, memoryType: q.MemoryType,
		tags: q.Tags, tagsAny: q.TagsAny, statuses: statuses, asOf: q.AsOf}
	legs, err := src.legs(ctx, legQuery{ns: q.Namespace, f: f, vector: vec, text: q.Query, terms: dedupe(text.Terms(q.Query)), limit: q.Limit})
	if err != nil {
		return nil, err
	}
	out := map[Leg][]LegHit{}
	for leg, hits := range legs {
		for _, h := range hits {
			out[leg] = append(out[leg], LegHit{ID: h.id, ContentSHA256: h.contentSHA256, MemoryType: h.memoryType, Score: h.score, Coverage: h.coverage})
		}
	}
	return out, nil
}

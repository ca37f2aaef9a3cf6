package app

import (
	"context"
	"fmt"
	"time"
)

// namespaceLag is one namespace the serving projection has not caught up with.
type namespaceLag struct {
	Org        string `json:"org"`
	Namespace  string `json:"namespace"`
	Generation int64  `json:"generation"`
	Watermark  int64  `json:"watermark"`
}

// projectionLag is how far the serving projection is behind the Postgres journal.
type projectionLag struct {
	NamespacesBehind int64          `json:"namespaces_behind"`
	SeqsBehind       int64          `json:"seqs_behind"`
	Behind           []namespaceLag `json:"behind"` // the furthest behind, at most 10
}

// projectionLag compares every namespace's generation with the serving projection's
// watermark. It reads every namespace: a health probe asks for it, not a hot path.
func (n *Node) projectionLag(ctx context.Context) (projectionLag, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	lag := projectionLag{Behind: []namespaceLag{}}
	rows, err := n.PG.Query(ctx, `WITH behind AS (
			SELECT g.org, g.scope AS namespace, g.generation, coalesce(w.seq, 0) AS watermark
			FROM loom.scope_generations g
			LEFT JOIN loom.projection_watermarks w ON w.projection = $1 AND w.org = g.org AND w.namespace = g.scope
			WHERE g.scope <> '*' AND g.generation > coalesce(w.seq, 0))
		SELECT org, namespace, generation, watermark, count(*) OVER (), sum(generation - watermark) OVER ()
		FROM behind ORDER BY generation - watermark DESC, org, namespace LIMIT 10`, n.Cfg.Projection)
	if err != nil {
		return lag, fmt.Errorf("read projection lag: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var l namespaceLag
		if err := rows.Scan(&l.Org, &l.Namespace, &l.Generation, &l.Watermark, &lag.NamespacesBehind, &lag.SeqsBehind); err != nil {
			return lag, fmt.Errorf("read projection lag: %w", err)
		}
		lag.Behind = append(lag.Behind, l)
	}
	return lag, rows.Err()
}

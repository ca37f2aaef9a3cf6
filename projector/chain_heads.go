package projector

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

// chainHeads keeps, per namespace, the last audit row hash this projector chained and
// what the authority said of the namespace when it did: the watermark its batch
// settled in Postgres and the generation of the tables serving then. A batch whose
// namespace's watermark, read from Postgres at its start, is still that one, whose
// first seq follows it, and whose serving tables are the same, continues the chain
// from the kept hash instead of reading the last one from ClickHouse: every row below
// the watermark was applied, its last audit row is the kept one (no seq below the
// batch is in flight anywhere, the batch holds the next), and another writer of the
// namespace (a rebalance, the repair pass, a second projector) would have moved the
// watermark, or a rebuild's switch the generation, which sends the batch back to the
// read. So two writers never chain one namespace from different heads.
type chainHeads struct {
	mu sync.Mutex
	m  map[nsKey]chainHead
}

// chainHead is one namespace's kept head.
type chainHead struct {
	watermark int64  // the namespace's watermark the batch that chained hash settled
	serving   int    // the serving tables' generation then (0 for a rebuild's projector)
	hash      string // the last audit row's hash at or below watermark; "" when none
}

// prevs returns the kept heads a batch may continue from: those of the batch's
// namespaces whose watermark at its start (marks) is the kept one and whose first seq
// is the next.
func (c *chainHeads) prevs(b batch, marks map[nsKey]int64, serving int) map[nsKey]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[nsKey]string{}
	for k, seqs := range b.seqs {
		h, ok := c.m[k]
		if ok && h.serving == serving && h.watermark == marks[k] && minSeq(seqs) == h.watermark+1 {
			out[k] = h.hash
		}
	}
	return out
}

// settle keeps the heads a batch leaves: for each of its namespaces whose watermark
// it moved from the one it read at its start (so no other writer moved it meanwhile)
// through its last seq, the hash of its last audit row there (chained is false for a
// batch written unchained, whose rows keep no hash: its namespaces' heads are
// forgotten). Every other namespace of the batch is forgotten.
func (c *chainHeads) settle(b batch, marks map[nsKey]int64, settled map[nsKey]settledMark, rows []*auditRow, serving int, chained bool) {
	last := map[nsKey]string{}
	for _, r := range rows { // in (org, namespace, seq, op) order when chained
		last[nsKey{r.Org, r.Namespace}] = r.RowHash
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[nsKey]chainHead{}
	}
	for k, seqs := range b.seqs {
		s, ok := settled[k]
		prev, kept := c.m[k]
		delete(c.m, k)
		if !chained || !ok || s.from != marks[k] || s.to != maxSeq(seqs) || s.to <= s.from {
			continue
		}
		hash, wrote := last[k]
		if !wrote {
			// No audit row in the batch: the head stays what it was, if it was kept
			// at the watermark the batch continued.
			if !kept || prev.watermark != s.from || prev.serving != serving {
				continue
			}
			hash = prev.hash
		}
		c.m[k] = chainHead{watermark: s.to, serving: serving, hash: hash}
	}
}

// forget drops every kept head (a batch that failed may have left the tables
// anywhere between).
func (c *chainHeads) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
}

func minSeq(seqs []int64) int64 {
	m := seqs[0]
	for _, s := range seqs {
		m = min(m, s)
	}
	return m
}

func maxSeq(seqs []int64) int64 {
	m := seqs[0]
	for _, s := range seqs {
		m = max(m, s)
	}
	return m
}

// servingGeneration reads which generation of the projection tables serves, for the
// serving projector's heads; a rebuild's projector writes its own set, which no
// switch renames under it (0).
func (p *Projector) servingGeneration(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	if !p.cfg.Tables.IsServing() {
		return 0, nil
	}
	s, err := readTablesState(ctx, pool, "")
	return s.Serving, err
}

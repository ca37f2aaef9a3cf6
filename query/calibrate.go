package query

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/scorebg"
	"github.com/loomplane/loom/internal/ttlcache"
)

// Calibration. A search's best hit is judged against the background: the scores the
// same query gives the namespace's documents that are not its answer. The pool every
// search ranks holds that background already: past its first few rows, a leg's pool
// is the namespace's documents nearest the query that still do not answer it, scored
// by the embedder (and the words) the namespace is searched with. So the background
// is read from the search's own pool (ranks backgroundFrom..backgroundTo by
// relevance), per namespace and per embedder by construction, the same on every
// search path since it reads only the legs' hits. Two gates read it: the floor
// (below_threshold: the best hit scores no better than the background's median, a
// typical unrelated document) and distinctness (low_calibrated_confidence: the best
// hit stands fewer than min_distinctness background spreads above the pool's tenth
// row, counted per unit of the headroom that row leaves, so it is one more of the near
// misses).
//
// A pool too small to hold a background (a narrow filter, a small namespace) borrows
// the namespace's: every search records its background's median and spread in
// loom.search_calibration, per (org, namespace, embedder), the last calibrationKeep
// of them, which the recalibration pass (workers/recalibration.go) rewrites from the
// namespace's vectors. A namespace with neither falls back to the scalar floor
// (LOOM_MEMORY_SEARCH_MIN_SCORE) and no distinctness gate.

const (
	backgroundFrom = scorebg.From // the pool's rows from here on are background (up to scorebg.To)
	// calibrationKeep is how many searches' backgrounds a namespace keeps.
	calibrationKeep = 128
	// calibrationMinSearches is how many a namespace's calibration needs to serve.
	calibrationMinSearches = 8
	// calibrationFlushEvery: a process writes a namespace's new backgrounds once it
	// holds this many, or calibrationFlushAfter after the first.
	calibrationFlushEvery = 16
	calibrationFlushAfter = 30 * time.Second
	// calibrationCacheTTL is how long a process reuses a namespace's calibration.
	calibrationCacheTTL = time.Minute
)

// Calibration sources, as the answer names them.
const (
	calibrationPool      = "pool"      // the search's own pool
	calibrationNamespace = "namespace" // the namespace's recorded backgrounds
	calibrationFallback  = "fallback"  // the scalar floor
)

// background is the distribution a search's best hit is judged against.
type background struct {
	Source string  `json:"source"`
	Rows   int     `json:"rows"`   // background rows of the pool
	Median float64 `json:"median"` // the background's median relevance: the calibrated floor
	Spread float64 `json:"spread"` // its standard deviation
	// Tenth is the relevance of the pool's row at backgroundFrom (0-based): the best
	// of the background.
	Tenth float64 `json:"tenth"`
}

// poolBackground reads the background of a fused pool: its candidates' relevance,
// best first, from backgroundFrom on (internal/scorebg, which the recalibration pass
// reads the namespace's vectors with too).
func poolBackground(pool []*candidate) background {
	rel := make([]float64, len(pool))
	for i, c := range pool {
		rel[i] = c.relevance
	}
	bg := background{Source: calibrationFallback}
	if len(rel) > backgroundFrom {
		sort.Sort(sort.Reverse(sort.Float64Slice(rel)))
		bg.Tenth = rel[backgroundFrom]
	}
	if median, spread, rows, ok := scorebg.Of(rel); ok {
		bg.Source, bg.Rows, bg.Median, bg.Spread = calibrationPool, rows, median, spread
	}
	return bg
}

// distinctness is how many background spreads the best hit stands above the
// background's best, per unit of the room that best leaves below 1 (raised to
// headroomExponent); ok is false when there is no background to judge by. The headroom
// is what makes the gate hold under another embedder: a semantic model scores
// unrelated text near 0.3 and a topic's near misses close under the answer, so its
// answers stand fewer spreads out than the hash embedder's (whose background sits near
// 0); dividing by the headroom moves the threshold with where the namespace's
// background sits instead of fixing it to one embedder's scale. The exponent and the
// default min_distinctness were fitted together on the quality corpora's tuning halves
// under both embedders (tests/quality/RESULTS-gates.md).
func (bg background) distinctness(best float64) (float64, bool) {
	if bg.Source == calibrationFallback || bg.Spread <= 0 {
		return 0, false
	}
	headroom := math.Pow(math.Max(1-bg.Tenth, 0.05), headroomExponent)
	return (best - bg.Tenth) / math.Max(bg.Spread, 1e-3) / headroom, true
}

// headroomExponent is how strongly the background's height moves the distinctness
// gate (see distinctness).
const headroomExponent = 0.75

// calibrationKey names a namespace's calibration: per embedder, since another model
// scores on another scale.
type calibrationKey struct{ org, namespace, embedder string }

// owned is k with strings of its own: a search's namespace may be a view of the
// request's buffer, which the next request overwrites (fiber's values unless the app
// runs Immutable, as loomd's does since), so a key kept past the request (the cache's,
// a pending write's) must not hold it.
func (k calibrationKey) owned() calibrationKey {
	return calibrationKey{strings.Clone(k.org), strings.Clone(k.namespace), strings.Clone(k.embedder)}
}

// namespaceCalibration is what a namespace's recorded backgrounds say.
type namespaceCalibration struct {
	searches       int
	median, spread float64
}

// calibrations keeps the namespaces' recorded backgrounds: read from Postgres at most
// once per calibrationCacheTTL, and written in batches, off the search's path.
type calibrations struct {
	pool  *pgxpool.Pool
	cache *ttlcache.Cache[calibrationKey, namespaceCalibration]

	mu      sync.Mutex
	pending map[calibrationKey]*pendingBackgrounds
}

type pendingBackgrounds struct {
	samples  [][2]float64 // median, spread
	since    time.Time
	flushing bool
}

func newCalibrations(pool *pgxpool.Pool) *calibrations {
	return &calibrations{pool: pool, cache: ttlcache.New[calibrationKey, namespaceCalibration](4096, calibrationCacheTTL),
		pending: map[calibrationKey]*pendingBackgrounds{}}
}

// of returns a namespace's calibration, or ok false when it has too few searches
// recorded (or the read fails: calibration is advice, never a reason to fail).
func (c *calibrations) of(ctx context.Context, k calibrationKey) (namespaceCalibration, bool) {
	if nc, ok := c.cache.Get(k); ok {
		return nc, nc.searches >= calibrationMinSearches
	}
	var raw []byte
	err := c.pool.QueryRow(ctx, calibrationSQL, k.org, k.namespace, k.embedder).Scan(&raw)
	nc := c.keep(k, raw, err)
	return nc, nc.searches >= calibrationMinSearches
}

const calibrationSQL = `SELECT samples FROM loom.search_calibration WHERE org = $1 AND namespace = $2 AND embedder = $3`

// queueOf queues the read of a namespace's calibration on b when the cache does not
// hold it, so a search's first round trip brings it and the verdict reads it from the
// cache, as of would have read it.
func (c *calibrations) queueOf(b *pgx.Batch, k calibrationKey) {
	if _, ok := c.cache.Get(k); ok {
		return
	}
	b.Queue(calibrationSQL, k.org, k.namespace, k.embedder).QueryRow(func(r pgx.Row) error {
		var raw []byte
		if err := r.Scan(&raw); err == nil || errors.Is(err, pgx.ErrNoRows) {
			c.keep(k, raw, err)
		}
		return nil
	})
}

// keep caches what a read of k's samples found (none when it failed).
func (c *calibrations) keep(k calibrationKey, raw []byte, err error) namespaceCalibration {
	nc := namespaceCalibration{}
	if err == nil {
		var samples [][2]float64
		if json.Unmarshal(raw, &samples) == nil {
			nc = summarise(samples)
		}
	}
	c.cache.Add(k.owned(), nc)
	return nc
}

// summarise takes the medians of the recorded medians and spreads.
func summarise(samples [][2]float64) namespaceCalibration {
	if len(samples) == 0 {
		return namespaceCalibration{}
	}
	med := make([]float64, len(samples))
	spr := make([]float64, len(samples))
	for i, s := range samples {
		med[i], spr[i] = s[0], s[1]
	}
	sort.Float64s(med)
	sort.Float64s(spr)
	return namespaceCalibration{searches: len(samples), median: med[len(med)/2], spread: spr[len(spr)/2]}
}

// record notes one search's background and writes the namespace's pending ones when
// enough have gathered; the write runs on its own goroutine and its failure is only
// a calibration left older.
func (c *calibrations) record(k calibrationKey, bg background, now time.Time) {
	if bg.Source != calibrationPool {
		return
	}
	k = k.owned() // the pending write outlives the request
	c.mu.Lock()
	p := c.pending[k]
	if p == nil {
		p = &pendingBackgrounds{since: now}
		c.pending[k] = p
	}
	p.samples = append(p.samples, [2]float64{round6(bg.Median), round6(bg.Spread)})
	if p.flushing || (len(p.samples) < calibrationFlushEvery && now.Sub(p.since) < calibrationFlushAfter) {
		c.mu.Unlock()
		return
	}
	batch := p.samples
	p.samples, p.flushing = nil, true
	c.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.write(ctx, k, batch)
		c.mu.Lock()
		p.flushing, p.since = false, time.Now()
		c.mu.Unlock()
	}()
}

// write appends samples to the namespace's recorded backgrounds, keeping the newest.
func (c *calibrations) write(ctx context.Context, k calibrationKey, samples [][2]float64) error {
	raw, err := json.Marshal(samples)
	if err != nil {
		return err
	}
	_, err = c.pool.Exec(ctx, `INSERT INTO loom.search_calibration AS c (org, namespace, embedder, samples, searches)
		VALUES ($1, $2, $3, $4::jsonb, jsonb_array_length($4::jsonb))
		ON CONFLICT (org, namespace, embedder) DO UPDATE SET
			samples = (SELECT jsonb_agg(e ORDER BY n) FROM (
				SELECT e, n FROM jsonb_array_elements(c.samples || EXCLUDED.samples) WITH ORDINALITY AS x(e, n)
				ORDER BY n DESC LIMIT $5) newest),
			searches = c.searches + EXCLUDED.searches, updated_at = now()`,
		k.org, k.namespace, k.embedder, raw, calibrationKeep)
	if err == nil {
		c.cache.Remove(k)
	}
	return err
}

// settleBackground is the background a search is judged by: its pool's, else its
// namespace's recorded one, else none (the scalar floor).
func (s *Service) settleBackground(ctx context.Context, k calibrationKey, pool []*candidate) background {
	bg := poolBackground(pool)
	if bg.Source == calibrationPool {
		s.calibrations.record(k, bg, s.now())
		return bg
	}
	if nc, ok := s.calibrations.of(ctx, k); ok {
		bg.Source, bg.Median, bg.Spread = calibrationNamespace, nc.median, nc.spread
		if len(pool) <= backgroundFrom {
			// No tenth row to stand above: the namespace's median stands in for it.
			bg.Tenth = nc.median
		}
	}
	return bg
}

// ForgetCalibration drops this process's cached calibration of a namespace and
// embedder, so its next search reads the recorded one: the recalibration pass of a
// process that serves search too calls it after rewriting the row (another process
// reads the new row within calibrationCacheTTL).
func (s *Service) ForgetCalibration(org, namespace, embedder string) {
	s.calibrations.cache.Remove(calibrationKey{org, namespace, embedder})
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/searchindex"
)

// searchTopK is the search size the scenario asks for.
const searchTopK = 10

// warmWait bounds how long a path's warm-up waits for its store to catch up with the load.
const warmWait = 5 * time.Minute

// queryPool is how many distinct queries a search run draws from; both sides draw
// from the same ones.
const queryPool = 200

// search measures memory.search (barrier, query embedding, the four legs, fusion,
// validation against the Postgres heads) in namespaces of each size on both paths
// search can read: the process's in-process index (LOOM_SEARCH_INDEX=memory), beside a
// bare in-process exact scan of the same vectors (the machine's limit), and, when the
// target has one, a process reading ClickHouse (LOOM_SEARCH_INDEX=clickhouse), beside
// the bare ClickHouse vector scan of the same rows.
func (r *runner) search(ctx context.Context) (*ScenarioResult, error) {
	res := searchResult()
	chURL := ""
	if r.t.OpenClickHouse != nil && !r.opts.SearchIndexOnly {
		url, stop, err := r.t.OpenClickHouse(ctx)
		if err != nil {
			return nil, err
		}
		defer stop()
		chURL = url
	}
	run, err := r.newSearchRun(ctx, chURL)
	if err != nil {
		return nil, err
	}
	for _, size := range r.opts.SearchSizes {
		if err := r.searchSize(ctx, res, run, size); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// searchResult is the search scenario's result before any row: what it measures and
// against what.
func searchResult() *ScenarioResult {
	return &ScenarioResult{
		Title: fmt.Sprintf("memory.search latency, top_k %d", searchTopK),
		Baseline: fmt.Sprintf("index cases: a bare in-process exact scan of the same vectors (float32 dot product of every "+
			"vector of the namespace with the query, top %d, one goroutine per caller, no filters, no other legs, no HTTP); "+
			"ClickHouse cases: the bare ClickHouse vector scan of the same rows (the dot product of every row of the namespace "+
			"in loom.memory_embeddings, top %d, without FINAL, filters or the other legs); query vectors are embedded "+
			"before the clock starts", searchTopK, searchTopK),
		Notes: []string{"each namespace is loaded with memory.bulk_set in an append_only namespace (unjudged, which only speeds the load); " +
			"queries are 4 words of the values' vocabulary, so the lexical legs find matches too",
			"index: the process under test, LOOM_SEARCH_INDEX=memory (the default); ClickHouse: a second process on the same " +
				"stores with the query role and LOOM_SEARCH_INDEX=clickhouse, opened for this scenario; both answer the same requests " +
				"through the same HTTP API",
			"before a namespace is measured, the process's index has applied every revision of it and finished its graph builds " +
				"(namespaces past LOOM_INDEX_GRAPH_MIN vectors get an HNSW graph, built in the background after the load): " +
				"the figures are the built graph's, not the exact scan a search falls back to while it builds",
			fmt.Sprintf("verdicts, outside the clock: %d answerable questions (four words of a loaded value) and %d no-answer ones "+
				"(four English words, which no value uses) per path; a search abstains when its verdict is not ok. Abstain precision is "+
				"the share of abstentions that fell on no-answer questions, abstain recall the share of no-answer questions that "+
				"abstained; both are reported, since either alone hides the other's failure", verdictQueries, verdictQueries),
			"CPU ms/call beside the point read: CPU time over the index path's searches (then the point reads' run), over the calls " +
				"answered; loomd is this process (the API, every role's background work and the benchmark's own client), read with " +
				"getrusage, Postgres from /proc; round trips are the statements and batches loomd's pool sent in the run"},
	}
}

// searchPath is an API search reads through: the process under test (its index) or
// the process that reads ClickHouse.
type searchPath struct {
	name string
	api  *client.Client
}

// searchRun is what every size of the search scenario shares: the queries, their
// vectors (embedded before any clock starts), the paths and the bare ClickHouse scan.
type searchRun struct {
	queries []string
	vectors [][]float32
	paths   []searchPath
	scan    string
}

// newSearchRun prepares the scenario's queries and paths; chURL, when set, is the API
// of the process that reads ClickHouse.
func (r *runner) newSearchRun(ctx context.Context, chURL string) (*searchRun, error) {
	run := &searchRun{queries: make([]string, queryPool), paths: []searchPath{{"index", r.api}}}
	// The same queries every run, as the corpus is the same: two runs on one --dir
	// (a base binary's and a new one's) search alike.
	rng := rand.New(rand.NewPCG(queryPool, searchCorpusVersion))
	for i := range run.queries {
		run.queries[i] = strings.Join(strings.Fields(sentence(rng))[:4], " ")
	}
	var err error
	if run.vectors, err = r.t.Process.Embedder.Embed(ctx, run.queries); err != nil {
		return nil, fmt.Errorf("embed the queries: %w", err)
	}
	run.scan = fmt.Sprintf(`SELECT memory_key, %s AS score FROM loom.memory_embeddings
		PREWHERE org = ? AND namespace = ? ORDER BY score DESC LIMIT %d`, r.t.Process.CH.Caps.Dot("embedding"), searchTopK)
	if chURL != "" {
		chAPI, err := newClient(chURL, r.t.Token)
		if err != nil {
			return nil, err
		}
		run.paths = append(run.paths, searchPath{"ClickHouse", chAPI})
	}
	return run, nil
}

// searchSize loads a namespace of size memories, waits for the index to hold it, warms
// each path up and measures each at every concurrency level.
func (r *runner) searchSize(ctx context.Context, res *ScenarioResult, run *searchRun, size int) error {
	ns := searchCorpusNamespace(size)
	if err := r.appendOnly(ctx, ns); err != nil {
		return err
	}
	values := searchCorpusValues(size)
	if err := r.loadCorpus(ctx, ns, values); err != nil {
		return err
	}
	st, err := r.settleIndex(ctx, ns)
	if err != nil {
		return err
	}
	if st.Vectors > 0 {
		// A graph is extended once the rows past it reach a fiftieth of it; until then
		// a search scans them exactly, so a run's figure depends on where the load left it.
		res.Rows = append(res.Rows, plainRow(fmt.Sprintf("%d memories", size), "of the vectors, in the HNSW graph (the rest scanned exactly)", float64(st.Graph)),
			plainRow(fmt.Sprintf("%d memories", size), "vectors", float64(st.Vectors)))
	}
	if err := r.settleUsage(ctx, ns); err != nil {
		return err
	}
	bare, err := r.exactScanOf(ctx, values)
	if err != nil {
		return err
	}
	paths, err := warmSearch(ctx, run, ns, size)
	if err != nil {
		return err
	}
	if len(paths) < len(run.paths) {
		res.Notes = append(res.Notes, fmt.Sprintf("%d memories: the ClickHouse path did not catch up with the load within %s "+
			"(PROJECTION_BEHIND); only the index path is measured", size, warmWait))
	}
	sized := *run
	sized.paths = paths
	run = &sized
	for _, p := range run.paths {
		if err := r.countVerdicts(ctx, res, p, ns, size, values); err != nil {
			return err
		}
	}
	for _, conc := range r.levels(5) {
		for _, p := range run.paths {
			if err := r.measureSearch(ctx, res, run, p, bare, ns, size, conc); err != nil {
				return err
			}
		}
	}
	return nil
}

// warmSearch sends each path a few searches of ns, and refuses a namespace whose
// searches find nothing: the scenario would measure empty answers. It returns the
// paths to measure: the ClickHouse path is left out when its projection has not caught
// up with the load within warmWait (a loaded machine), the index path never is.
func warmSearch(ctx context.Context, run *searchRun, ns string, size int) ([]searchPath, error) {
	var paths []searchPath
	for _, p := range run.paths {
		var warm *client.SearchAnswer
		// A loaded machine's projector may still be behind the load: the ClickHouse path
		// answers PROJECTION_BEHIND until it catches up, which is no figure to measure.
		deadline := time.Now().Add(warmWait)
		behind := false
		for _, q := range run.queries[:3] {
			for {
				var err error
				warm, err = p.api.Search(ctx, ns, client.SearchRequest{Query: q, TopK: searchTopK})
				var ce *client.Error
				behind = errors.As(err, &ce) && ce.Code == client.CodeProjectionBehind
				if behind && time.Now().Before(deadline) {
					continue
				}
				if behind && p.name != "index" {
					break
				}
				if err != nil {
					return nil, fmt.Errorf("warm-up search of %s (%s): %w", ns, p.name, err)
				}
				break
			}
			if behind {
				break
			}
		}
		if behind {
			continue
		}
		if len(warm.Hits) == 0 {
			return nil, fmt.Errorf("a search of %d memories (%s) found nothing: the scenario would measure empty answers", size, p.name)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// measureSearch runs path p's searches of ns at concurrency conc, then its baseline
// (the bare exact scan for the index, the bare ClickHouse scan for ClickHouse), and
// adds the pair to res.
func (r *runner) measureSearch(ctx context.Context, res *ScenarioResult, run *searchRun, p searchPath, bare *exactScan, ns string, size, conc int) error {
	name := fmt.Sprintf("%d memories, concurrency=%d, %s", size, conc, p.name)
	rands := r.workerRands(conc)
	queries, vectors := run.queries, run.vectors
	cost := r.costMark(r.t.RoundTrips)
	census := r.t.RoundTrips.Census()
	loom, err := r.closedLoop(ctx, "memory.search "+name, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
		q := queries[rands[w].IntN(len(queries))]
		_, err := p.api.Search(ctx, ns, client.SearchRequest{Query: q, TopK: searchTopK})
		return err
	})
	if err != nil {
		return err
	}
	if p.name == "index" {
		writeCensus(r.opts.Progress, "memory.search "+name, census, r.t.RoundTrips.Census(), loom.Calls)
	}
	searchSpent := cost.since(r)
	var base Sample
	if p.name == "index" {
		base, err = r.closedLoop(ctx, "bare in-process exact scan "+name, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
			bare.top(vectors[rands[w].IntN(len(vectors))], searchTopK)
			return nil
		})
	} else {
		conn := r.t.Process.CH
		base, err = r.closedLoop(ctx, "bare ClickHouse vector scan "+name, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
			return scanAll(ctx, conn, run.scan, vectors[rands[w].IntN(len(vectors))], r.t.Org, ns)
		})
	}
	if err != nil {
		return err
	}
	res.compare(name, loom, base, "searches/s")
	if p.name == "index" {
		return r.measurePointRead(ctx, res, ns, name, size, conc, loom, searchSpent)
	}
	return nil
}

// measurePointRead runs memory.get of ns's keys at concurrency conc right after its
// searches and adds the searches' latency beside it: the share of a search that is
// more than a request to the process and one Postgres read.
func (r *runner) measurePointRead(ctx context.Context, res *ScenarioResult, ns, name string, size, conc int, search Sample, searchSpent spent) error {
	rands := r.workerRands(conc)
	cost := r.costMark(r.t.RoundTrips)
	get, err := r.closedLoop(ctx, "memory.get "+name, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
		_, err := r.api.Get(ctx, ns, loadKey(rands[w].IntN(size)), client.Identity{}, time.Time{})
		return err
	})
	if err != nil {
		return err
	}
	getSpent := cost.since(r)
	row := name + ", search against a point read (memory.get) of the same namespace"
	res.add(row, "p50 ms", search.P50MS, get.P50MS)
	res.add(row, "p99 ms", search.P99MS, get.P99MS)
	if search.Calls == 0 || get.Calls == 0 {
		return nil
	}
	s, g := searchSpent.per(search.Calls), getSpent.per(get.Calls)
	res.add(row, "CPU ms/call, loomd", s.self, g.self)
	res.add(row, "CPU ms/call, Postgres", s.postgres, g.postgres)
	res.add(row, "Postgres round trips/call", s.trips, g.trips)
	return nil
}

// settleIndex waits until the process's index has applied every revision of ns and
// its graph builds are done, so a run measures the index as it serves once built, and
// returns the namespace's holdings then.
func (r *runner) settleIndex(ctx context.Context, ns string) (searchindex.SpaceStats, error) {
	x := r.t.Process.Index()
	if x == nil {
		return searchindex.SpaceStats{}, nil
	}
	start := time.Now()
	gen, err := generations.Read(ctx, r.t.Process.PG, r.t.Org, ns)
	if err != nil {
		return searchindex.SpaceStats{}, fmt.Errorf("read the generation of %s: %w", ns, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	sp := searchindex.Space{Org: r.t.Org, Namespace: ns}
	if err := x.WaitFor(wctx, sp, gen); err != nil {
		return searchindex.SpaceStats{}, fmt.Errorf("wait for the index to apply %s through seq %d: %w", ns, gen, err)
	}
	x.Settle()
	for _, st := range x.Stats().Spaces {
		if st.Space == sp {
			r.progress("    index settled in %s: %d vectors, %d graph nodes", time.Since(start).Round(100*time.Millisecond), st.Vectors, st.Graph)
			return st, nil
		}
	}
	return searchindex.SpaceStats{}, nil
}

// exactScan is a namespace's vectors in one flat array: the bare in-process search.
type exactScan struct {
	dim  int
	flat []float32
}

// exactScanOf embeds values as the process under test does and lays them out flat.
func (r *runner) exactScanOf(ctx context.Context, values []string) (*exactScan, error) {
	s := &exactScan{}
	for from := 0; from < len(values); from += 1000 {
		vs, err := r.t.Process.Embedder.Embed(ctx, values[from:min(from+1000, len(values))])
		if err != nil {
			return nil, fmt.Errorf("embed the loaded values: %w", err)
		}
		for _, v := range vs {
			s.dim = len(v)
			s.flat = append(s.flat, v...)
		}
	}
	return s, nil
}

// top returns the indexes of the k vectors with the highest dot product with q.
func (s *exactScan) top(q []float32, k int) []int {
	best := make([]int, 0, k+1)
	scores := make([]float32, 0, k+1)
	for i := 0; i*s.dim < len(s.flat); i++ {
		row := s.flat[i*s.dim : (i+1)*s.dim]
		var dot float32
		for j, x := range row {
			dot += x * q[j]
		}
		if len(best) == k && dot <= scores[k-1] {
			continue
		}
		at := len(best)
		for at > 0 && scores[at-1] < dot {
			at--
		}
		best = append(best[:at], append([]int{i}, best[at:]...)...)
		scores = append(scores[:at], append([]float32{dot}, scores[at:]...)...)
		if len(best) > k {
			best, scores = best[:k], scores[:k]
		}
	}
	return best
}

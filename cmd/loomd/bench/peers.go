package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/philippgille/chromem-go"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/llm/llmtest"
	"github.com/loomplane/loom/internal/searchindex"
)

// The peers scenario writes the same short facts, one at a time, into Loom and into the
// stores a user would pick instead, then searches each at every checkpoint size with
// the same queries. Every system embeds through the same scripted OpenAI-compatible
// server over HTTP, so the embedder's cost is equal. What each does per add differs,
// and the notes say so: Loom judges each write against its peers and keeps versions and
// an outbox; mem0 (no inference) embeds and inserts; chromem-go embeds and appends in
// memory.

const (
	// peerEmbedModel and peerEmbedDim are the scripted embedder's model and size.
	peerEmbedModel = "bench-peers-embedder"
	peerEmbedDim   = 256
	// peerQueries is how many searches each system runs at each checkpoint.
	peerQueries = 200
)

// PeerVersions pins the peers measured; cmd/loomd/bench/peers/package.json pins the
// npm ones to the same versions, go.mod chromem-go's.
var PeerVersions = map[string]string{"mem0ai": "3.3.1", "chromem-go": "v0.7.0"}

// peerCorpus is the facts, in write order, and their memory keys.
type peerCorpus struct {
	facts, keys []string
}

// peerPhrases are what a fact says of its person, each with the question that asks it.
var peerPhrases = []struct{ fact, query string }{
	{"lives in the harbour town of %s", "which town does %s live in"},
	{"works as a %s at the old mill", "what is the job of %s"},
	{"keeps a pet tortoise named %s", "what is the name of the tortoise %s keeps"},
	{"drives a rusty %s to work every morning", "what car does %s drive"},
	{"plays the %s in a folk band on weekends", "which instrument does %s play"},
	{"was born in the valley of %s", "where was %s born"},
	{"collects rare %s stamps from abroad", "what stamps does %s collect"},
	{"is allergic to %s berries", "what is %s allergic to"},
}

// newPeerCorpus draws n facts: a person (two made-up words, no two facts share both),
// a phrase and a made-up object.
func newPeerCorpus(n int, rng *rand.Rand) peerCorpus {
	c := peerCorpus{facts: make([]string, n), keys: make([]string, n)}
	for i := range n {
		p := peerPhrases[rng.IntN(len(peerPhrases))]
		c.facts[i] = peerPerson(i) + " " + fmt.Sprintf(p.fact, words[rng.IntN(len(words))])
		c.keys[i] = fmt.Sprintf("fact-%d", i)
	}
	return c
}

// peerPerson is fact i's person: first names cycle through the vocabulary, and the
// family name steps by an odd stride per cycle, so no two facts below 40k share both.
func peerPerson(i int) string {
	n := len(words)
	return words[i%n] + " " + words[(i/n*97+i*3)%n]
}

// query is the question fact i answers.
func (c peerCorpus) query(i int) string {
	for _, p := range peerPhrases {
		prefix := peerPerson(i) + " " + strings.SplitN(p.fact, " %s", 2)[0]
		if strings.HasPrefix(c.facts[i], prefix) {
			return fmt.Sprintf(p.query, peerPerson(i))
		}
	}
	return peerPerson(i)
}

// peerCheckpoint is one size's searches: the facts they ask about.
type peerCheckpoint struct {
	size    int
	targets []int
}

func peerCheckpoints(sizes []int, rng *rand.Rand) []peerCheckpoint {
	out := make([]peerCheckpoint, len(sizes))
	for i, size := range sizes {
		out[i] = peerCheckpoint{size: size, targets: make([]int, peerQueries)}
		for j := range out[i].targets {
			out[i].targets[j] = rng.IntN(size)
		}
	}
	return out
}

// peerRun is what one system measured.
type peerRun struct {
	addMS []float64 // every add, in write order
	at    []peerAt  // per checkpoint
}

type peerAt struct {
	size     int
	searchMS []float64
	hits     int   // searches whose top hit is the fact asked about
	rssBytes int64 // resident memory after the checkpoint's load (see the notes)
	retries  int   // Loom: calls sent again after a retryable answer (a 503), since the checkpoint before
}

// peers runs the scenario: Loom, mem0 and chromem-go, one after another, each through
// every checkpoint.
func (r *runner) peers(ctx context.Context) (*ScenarioResult, error) {
	sizes := slices.Clone(r.opts.PeerSizes)
	slices.Sort(sizes)
	if len(sizes) == 0 || r.t.OpenPeer == nil {
		return nil, errors.New("peers: no sizes, or no way to open a Loom process on the scripted embedder")
	}
	corpus := newPeerCorpus(sizes[len(sizes)-1], r.rng)
	checkpoints := peerCheckpoints(sizes, r.rng)
	owner := &owner{}
	embedder := llmtest.New(owner)
	embedder.EmbedDim(peerEmbedDim)
	defer func() {
		if err := owner.finish(); err != nil {
			r.progress("peers: %v", err)
		}
	}()
	res := &ScenarioResult{
		Title: fmt.Sprintf("Loom beside the stores a user would pick instead: %d short facts added one at a time, %d searches at each of %v memories",
			sizes[len(sizes)-1], peerQueries, sizes),
		Baseline: fmt.Sprintf("each peer (mem0ai %s's Memory with its SQLite vector store and history, no inference; chromem-go %s in process) on the same facts, queries and embedder",
			PeerVersions["mem0ai"], PeerVersions["chromem-go"]),
		Notes: []string{
			"every system embeds through the same scripted OpenAI-compatible server over HTTP (/v1/embeddings, " +
				fmt.Sprint(peerEmbedDim) + " dimensions), so the embedder's cost is equal",
			"per add, Loom judges the write against its peers (the default conflict policy), commits a version, its data key and an outbox row, " +
				"and the relay and projections follow; mem0 with infer:false embeds, inserts into SQLite and writes a history row; chromem-go embeds and appends in memory",
			"hit@1: the top hit is the fact the question asks about (each question names the fact's person)",
			"resident MiB is not alike across systems: mem0's is its whole node process's RSS (the runtime included); chromem-go's is the Go heap's growth over " +
				"its load (it runs inside the bench process); Loom's is its search index's own estimate of the namespace's bytes (Postgres and ClickHouse hold the rest, on disk)",
			"chromem-go ranks by the vector alone; mem0 3.x and Loom also match words, which is why their hit@1 is higher on questions that share only a name with their fact",
		},
	}
	type system struct {
		name string
		run  func(context.Context) (*peerRun, error)
	}
	systems := []system{
		{"Loom", func(ctx context.Context) (*peerRun, error) { return r.peerLoom(ctx, embedder.URL, corpus, checkpoints) }},
		{"mem0", func(ctx context.Context) (*peerRun, error) { return r.peerMem0(ctx, embedder.URL, corpus, checkpoints) }},
		{"chromem-go", func(ctx context.Context) (*peerRun, error) {
			return peerChromem(ctx, embedder.URL, corpus, checkpoints)
		}},
	}
	if r.opts.PeersLoomOnly {
		systems = systems[:1]
		res.Baseline = "none: Loom alone (--peers-loom-only)"
	}
	var runs []*peerRun
	for _, s := range systems {
		r.progress("  peers: %s", s.name)
		run, err := s.run(ctx)
		if err != nil {
			return nil, fmt.Errorf("peers, %s: %w", s.name, err)
		}
		runs = append(runs, run)
	}
	if r.opts.PeersLoomOnly {
		peerRowsAlone(res, runs[0])
		return res, nil
	}
	peerRows(res, runs[0], map[string]*peerRun{"mem0ai " + PeerVersions["mem0ai"]: runs[1], "chromem-go " + PeerVersions["chromem-go"]: runs[2]})
	return res, nil
}

// peerRowsAlone adds Loom's figures at each checkpoint, with no peer beside them.
func peerRowsAlone(res *ScenarioResult, loom *peerRun) {
	for i, at := range loom.at {
		from := 0
		if i > 0 {
			from = loom.at[i-1].size
		}
		c := fmt.Sprintf("%d memories, Loom alone", at.size)
		res.alone(c, "add/s", perSecond(loom.addMS[from:at.size]))
		res.alone(c, "add p50 ms", msPercentile(loom.addMS[from:at.size], 0.5))
		res.alone(c, "search p50 ms", msPercentile(at.searchMS, 0.5))
		res.alone(c, "search p99 ms", msPercentile(at.searchMS, 0.99))
		res.alone(c, "hit@1", round(float64(at.hits)/float64(len(at.searchMS)), 3))
		res.alone(c, "resident MiB", round(float64(at.rssBytes)/(1<<20), 1))
		res.alone(c, "retries (503)", float64(at.retries))
	}
}

// peerRows adds, for each peer and checkpoint, Loom's figures beside the peer's.
func peerRows(res *ScenarioResult, loom *peerRun, peers map[string]*peerRun) {
	names := make([]string, 0, len(peers))
	for name := range peers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		peer := peers[name]
		for i, at := range loom.at {
			pat := peer.at[i]
			from := 0
			if i > 0 {
				from = loom.at[i-1].size
			}
			c := fmt.Sprintf("%d memories, vs %s", at.size, name)
			res.add(c, "add/s", perSecond(loom.addMS[from:at.size]), perSecond(peer.addMS[from:at.size]))
			res.add(c, "add p50 ms", msPercentile(loom.addMS[from:at.size], 0.5), msPercentile(peer.addMS[from:at.size], 0.5))
			res.add(c, "search p50 ms", msPercentile(at.searchMS, 0.5), msPercentile(pat.searchMS, 0.5))
			res.add(c, "search p99 ms", msPercentile(at.searchMS, 0.99), msPercentile(pat.searchMS, 0.99))
			res.add(c, "hit@1", round(float64(at.hits)/float64(len(at.searchMS)), 3), round(float64(pat.hits)/float64(len(pat.searchMS)), 3))
			res.add(c, "resident MiB", round(float64(at.rssBytes)/(1<<20), 1), round(float64(pat.rssBytes)/(1<<20), 1))
			res.alone(c, "Loom's retries (503)", float64(at.retries))
		}
	}
}

// perSecond is the rate of sequential calls that took ms each.
func perSecond(ms []float64) float64 {
	var total float64
	for _, m := range ms {
		total += m
	}
	if total == 0 {
		return 0
	}
	return round(float64(len(ms))/(total/1000), 1)
}

func msPercentile(took []float64, p float64) float64 {
	if len(took) == 0 {
		return 0
	}
	d := make([]time.Duration, len(took))
	for i, m := range took {
		d[i] = time.Duration(m * float64(time.Millisecond))
	}
	slices.Sort(d)
	return ms(percentile(d, p))
}

// heapInUse is the Go heap in use after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// peerLoom runs Loom: a process on the same stores whose embedder is the scripted
// server, written with memory.set and searched with memory.search.
func (r *runner) peerLoom(ctx context.Context, embedURL string, c peerCorpus, cps []peerCheckpoint) (*peerRun, error) {
	cfg := r.t.Process.Cfg
	cfg.Roles = config.Roles{config.RoleCommand, config.RoleQuery}
	cfg.Boot.Migrate = false
	cfg.Embedder = config.Embedder{Kind: "openai", Dim: peerEmbedDim,
		OpenAI: config.OpenAI{BaseURL: embedURL, APIKey: "bench", Model: peerEmbedModel}}
	var trips *RoundTrips
	if r.opts.Statements {
		trips = &RoundTrips{}
		trips.CountStatements()
	}
	url, stop, err := r.t.OpenPeer(ctx, cfg, trips)
	if err != nil {
		return nil, fmt.Errorf("open a Loom process on the scripted embedder: %w", err)
	}
	defer stop()
	// A real client waits out a 503 (ADMISSION_CONTENDED while the index catches up,
	// PROJECTION_BEHIND) for its Retry-After and sends the call again; the add's time
	// includes the wait, and the retries are counted. No Idempotency-Key: a key makes
	// the server record each write's answer (more statements an add than measured
	// before), and a refusal before the commit is safe to send again without one.
	retries := 0
	api, err := newClient(url, r.t.Token, client.WithRetry(client.Retry{MaxElapsed: time.Minute,
		OnRetry: func(err error, wait time.Duration) {
			retries++
			r.progress("    Loom: retrying in %v after %v", wait, err)
		}}))
	if err != nil {
		return nil, err
	}
	ns := r.namespace("peers")
	run := &peerRun{}
	var verdicts []string
	written := 0
	for _, cp := range cps {
		from, census, retried := written, trips.Census(), retries
		for ; written < cp.size; written++ {
			t0 := time.Now()
			a, err := api.Set(ctx, ns, c.keys[written], client.SetRequest{Value: c.facts[written]})
			if err != nil {
				return nil, fmt.Errorf("memory.set %d: %w", written, err)
			}
			run.addMS = append(run.addMS, float64(time.Since(t0))/float64(time.Millisecond))
			verdicts = append(verdicts, verdictClass(a))
		}
		writeCensus(r.opts.Progress, fmt.Sprintf("the peers' Loom's adds %d to %d (its own pool)", from+1, cp.size),
			census, trips.Census(), cp.size-from)
		r.addsByVerdict(run.addMS[from:cp.size], verdicts[from:cp.size])
		at := peerAt{size: cp.size}
		for _, target := range cp.targets {
			t0 := time.Now()
			a, err := api.Search(ctx, ns, client.SearchRequest{Query: c.query(target), TopK: 5})
			if err != nil {
				return nil, fmt.Errorf("memory.search: %w", err)
			}
			at.searchMS = append(at.searchMS, float64(time.Since(t0))/float64(time.Millisecond))
			if len(a.Hits) > 0 && a.Hits[0].MemoryKey == c.keys[target] {
				at.hits++
			}
		}
		at.rssBytes, at.retries = r.indexBytes(ns), retries-retried
		run.at = append(run.at, at)
		r.progress("    Loom at %d: add p50 %.2f ms, search p50 %.2f ms, hit@1 %d/%d, %d retries", cp.size,
			msPercentile(run.addMS, 0.5), msPercentile(at.searchMS, 0.5), at.hits, len(cp.targets), at.retries)
	}
	return run, nil
}

// verdictClass names an add by its verdict and, for a conflict, how many peers it
// marked: a conflict's commit writes a copy of each.
func verdictClass(a *client.SetAnswer) string {
	if a.Verdict != "conflict" {
		return a.Verdict
	}
	switch n := len(a.ConflictWith); {
	case n <= 2:
		return fmt.Sprintf("conflict, %d peers", n)
	case n <= 8:
		return "conflict, 3-8 peers"
	default:
		return "conflict, 9+ peers"
	}
}

// addsByVerdict writes, on the progress, the adds' p50 by verdictClass.
func (r *runner) addsByVerdict(addMS []float64, classes []string) {
	by := map[string][]float64{}
	for i, c := range classes {
		by[c] = append(by[c], addMS[i])
	}
	names := slices.Sorted(maps.Keys(by))
	for _, name := range names {
		r.progress("      %-22s %5d adds, p50 %.2f ms, p90 %.2f ms", name, len(by[name]), msPercentile(by[name], 0.5), msPercentile(by[name], 0.9))
	}
}

// indexBytes is what the process's search index holds for a namespace, by its own
// estimate.
func (r *runner) indexBytes(ns string) int64 {
	x := r.t.Process.Index()
	if x == nil {
		return 0
	}
	for _, st := range x.Stats().Spaces {
		if st.Space == (searchindex.Space{Org: r.t.Org, Namespace: ns}) {
			return st.Bytes
		}
	}
	return 0
}

// peerChromem runs chromem-go: an in-process collection whose embedding function calls
// the scripted server.
func peerChromem(ctx context.Context, embedURL string, c peerCorpus, cps []peerCheckpoint) (*peerRun, error) {
	normalized := true
	embed := chromem.NewEmbeddingFuncOpenAICompat(embedURL, "bench", peerEmbedModel, &normalized)
	before := heapInUse()
	db := chromem.NewDB()
	col, err := db.CreateCollection("peers", nil, embed)
	if err != nil {
		return nil, err
	}
	run := &peerRun{}
	written := 0
	for _, cp := range cps {
		for ; written < cp.size; written++ {
			t0 := time.Now()
			if err := col.AddDocument(ctx, chromem.Document{ID: c.keys[written], Content: c.facts[written]}); err != nil {
				return nil, fmt.Errorf("add %d: %w", written, err)
			}
			run.addMS = append(run.addMS, float64(time.Since(t0))/float64(time.Millisecond))
		}
		at := peerAt{size: cp.size}
		for _, target := range cp.targets {
			t0 := time.Now()
			res, err := col.Query(ctx, c.query(target), 5, nil, nil)
			if err != nil {
				return nil, fmt.Errorf("query: %w", err)
			}
			at.searchMS = append(at.searchMS, float64(time.Since(t0))/float64(time.Millisecond))
			if len(res) > 0 && res[0].ID == c.keys[target] {
				at.hits++
			}
		}
		at.rssBytes = heapInUse() - before
		run.at = append(run.at, at)
	}
	runtime.KeepAlive(db)
	return run, nil
}

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/tests/testenv"
)

// The release gate "semantic admission" (docs/architecture.md): 16 concurrent writes
// of one fact under 16 keys end with exactly one new fact; the other 15 answer merge
// or duplicate, none lost and none a second live copy. Run 20 times.
func TestSemanticAdmission(t *testing.T) {
	// Two API processes: a writer meets the other process's commits in its gap without
	// their vectors, and measures them by embedding their text again. Each process
	// reads peers from its own search index (LOOM_SEARCH_INDEX=memory, the default) and
	// captures the index's position for the gap check.
	n, url := env.API(t, nil)
	n2, url2 := env.API(t, nil)
	if n.Index() == nil || n2.Index() == nil {
		t.Fatal("the API processes hold no search index: admission would be tested on the ClickHouse path")
	}
	token := env.Token(t, n, auth.NewToken{Org: "acme"})
	clients := []*client.Client{testenv.NewClient(url, token).Typed(t), testenv.NewClient(url2, token).Typed(t)}
	pool := env.PG(t)
	for run := 0; run < 20; run++ {
		ns := testenv.Unique(t, fmt.Sprintf("adm%d", run))
		fact := fmt.Sprintf("the quarterly planning offsite %d is in porto in october", run)
		answers := make([]*client.SetAnswer, 16)
		errs := make([]error, 16)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i], errs[i] = clients[i%2].Set(context.Background(), ns, fmt.Sprintf("offsite-%02d", i), client.SetRequest{Value: fact})
			}()
		}
		wg.Wait()
		written, other := 0, map[string]int{}
		for i, a := range answers {
			if errs[i] != nil {
				t.Fatalf("run %d, writer %d: %v", run, i, errs[i])
			}
			switch {
			case a.Written && a.Verdict == "new":
				written++
			case a.Verdict == "merge" || a.Verdict == "duplicate":
				other[a.Verdict]++
			default:
				t.Fatalf("run %d, writer %d answered %+v", run, i, a)
			}
		}
		live := testenv.Int(t, pool, `SELECT count(*) FROM loom.memory_current WHERE org = 'acme' AND namespace = $1
			AND row->>'status' = 'active' AND NOT (row->>'tombstone')::bool`, ns)
		if written != 1 || live != 1 {
			t.Fatalf("run %d: %d new facts answered, %d live active rows; want exactly one (others: %v)", run, written, live, other)
		}
	}
}

// A pin racing a write of a new value on one key: either the write lands before the
// pin (and the pin covers the new value), or the write answers 409. A live value is
// never written over a pin it did not see.
func TestPinRacingAWrite(t *testing.T) {
	n, url := env.SharedAPI(t)
	tc := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"})).Typed(t)
	ctx := context.Background()
	ns := testenv.Unique(t, "pinrace")
	if _, err := tc.Configure(ctx, ns, client.NamespaceConfig{ConflictPolicy: "append_only"}); err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]int{}
	for i := 0; i < 40; i++ {
		key := fmt.Sprintf("k%02d", i)
		if _, err := tc.Set(ctx, ns, key, client.SetRequest{Value: "before the race"}); err != nil {
			t.Fatal(err)
		}
		var pin *client.CopyAnswer
		var write *client.SetAnswer
		var pinErr, writeErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			pin, pinErr = tc.Pin(ctx, ns, key, client.Identity{})
		}()
		go func() {
			defer wg.Done()
			write, writeErr = tc.Set(ctx, ns, key, client.SetRequest{Value: "after the race"})
		}()
		wg.Wait()
		head, err := tc.Get(ctx, ns, key, client.Identity{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		value := string(head.Value)
		switch {
		case pinErr == nil && writeErr == nil:
			// The write landed first; the pin was built over it.
			if pin.Version <= write.Version || value != `"after the race"` || !head.Pinned {
				t.Fatalf("both answered 200 but the pin does not cover the write: pin %+v write %+v head %+v", pin, write, head)
			}
			outcomes["write then pin"]++
		case pinErr == nil && client.IsCode(writeErr, client.CodePinnedConflict):
			if value != `"before the race"` || !head.Pinned {
				t.Fatalf("the write was refused but the head is %+v", head)
			}
			outcomes["pin then refused write"]++
		case testenv.Retryable503(pinErr, client.CodeAdmissionContended) && writeErr == nil:
			// The pin was built over the old head and the write moved it: retryable.
			if value != `"after the race"` || head.Pinned {
				t.Fatalf("the pin was refused but the head is %+v", head)
			}
			outcomes["write, pin contended"]++
		default:
			t.Fatalf("pin %+v %v, write %+v %v", pin, pinErr, write, writeErr)
		}
	}
	t.Logf("outcomes over 40 races: %v", outcomes)
}

// A policy change that lands between a write's read of the policy and its commit sends
// the write back: it is judged again under the new policy.
func TestPolicyChangeSendsAWriteBack(t *testing.T) {
	ns := testenv.Unique(t, "policy")
	var c *testenv.Client
	once := true
	n, url := env.API(t, nil, app.WithCommandFaults(command.Faults{BeforeCommit: func() {
		if once {
			once = false
			if _, err := c.Typed(t).AddBlacklistPattern(context.Background(), ns, "launch codes"); err != nil {
				t.Errorf("blacklist add: %v", err)
			}
		}
	}}))
	c = testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"}))
	_, err := c.Typed(t).Set(context.Background(), ns, "k", client.SetRequest{Value: "the launch codes are in the safe"})
	if e, ok := client.AsError(err); !ok || e.Status != http.StatusUnprocessableEntity || e.Code != client.CodeBlacklisted {
		t.Fatalf("a write whose policy changed before its commit: %v", err)
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.memory_revisions WHERE org = 'acme' AND namespace = $1`, ns); n != 0 {
		t.Fatalf("%d revisions committed", n)
	}
}

// A process keeps each namespace's policy between writes. A refusal it reached on a
// policy another process has since changed does not stand: a pattern removed
// elsewhere no longer refuses the value here, and one added elsewhere refuses it.
func TestAPolicyChangedByAnotherProcessJudgesTheNextWrite(t *testing.T) {
	ns := testenv.Unique(t, "policy2")
	writerN, writerURL := env.API(t, nil)
	_, adminURL := env.API(t, nil)
	writer := testenv.NewClient(writerURL, env.Token(t, writerN, auth.NewToken{Org: "acme"})).Typed(t)
	admin := testenv.NewClient(adminURL, env.Token(t, writerN, auth.NewToken{Org: "acme"})).Typed(t)
	ctx := context.Background()
	blacklisted := func(key string) bool {
		t.Helper()
		_, err := writer.Set(ctx, ns, key, client.SetRequest{Value: "the launch codes are in the safe"})
		if e, ok := client.AsError(err); ok && e.Code == client.CodeBlacklisted {
			return true
		}
		if err != nil {
			t.Fatal(err)
		}
		return false
	}
	if _, err := admin.AddBlacklistPattern(ctx, ns, "launch codes"); err != nil {
		t.Fatal(err)
	}
	if !blacklisted("a") {
		t.Fatal("a blacklisted value was written")
	}
	if _, err := admin.RemoveBlacklistPattern(ctx, ns, "launch codes"); err != nil {
		t.Fatal(err)
	}
	if blacklisted("b") {
		t.Fatal("a pattern another process removed still refused the value")
	}
	if _, err := admin.AddBlacklistPattern(ctx, ns, "launch codes"); err != nil {
		t.Fatal(err)
	}
	if !blacklisted("c") {
		t.Fatal("a pattern another process added did not refuse the value")
	}
}

// admissionCommits is a process's count of judged writes' commits with outcome, by its
// /metrics.
func admissionCommits(t *testing.T, tc *client.Client, outcome string) float64 {
	t.Helper()
	return metric(t, tc, `loom_admission_commits_total{outcome="`+outcome+`"}`)
}

// Eight writers of unrelated facts into one namespace through one process: each
// commit finds the ones just before it in its gap, and rules them out on the vectors
// this process embedded, so none goes back to its verdict. (The vectors were kept
// only once each commit answered, and the commit queued behind it on the namespace's
// lock found its row unmeasured: four in ten commits went round again.)
func TestWritersOfOneNamespaceRuleOutEachOthersCommits(t *testing.T) {
	n, url := env.API(t, nil) // a process of its own: the test counts its commits
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"})).Typed(t)
	ns := testenv.Unique(t, "gap")
	syllables := []string{"ka", "lo", "mi", "ru", "te", "zan", "pol", "dre", "vu", "sho", "ne", "gri"}
	word := func(n int) string { // a made-up word of its own for every n
		return syllables[n%12] + syllables[n/12%12] + syllables[n/144%12]
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 6 && errs[w] == nil; i++ {
				k := w*6 + i
				fact := strings.Join([]string{word(5*k + 200), word(5*k + 201), word(5*k + 202), word(5*k + 203), word(5*k + 204)}, " ")
				var a *client.SetAnswer
				if a, errs[w] = c.Set(context.Background(), ns, fmt.Sprintf("fact-%02d", k), client.SetRequest{Value: fact}); errs[w] == nil && !a.Written {
					errs[w] = fmt.Errorf("fact %d answered %+v", k, a)
				}
			}
		}()
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", w, err)
		}
	}
	if got := admissionCommits(t, c, "committed"); got != 48 {
		t.Fatalf("%v commits, want the 48 writes", got)
	}
	if again := admissionCommits(t, c, "gap"); again != 0 {
		t.Fatalf("%v commits went back to their verdict over rows this process had measured", again)
	}
}

// Writers of one key queue behind each other's commits and go in one transaction
// together (command/commit.go); all but the first of a transaction's writes of the key
// were built over a head the first replaces, so they go back to read it. Every write
// still lands as its own version, and the namespace's seqs have no holes: the seqs a
// transaction drew for the writes it left out go back. A write that loses every round
// answers the retryable ADMISSION_CONTENDED, which the client retries.
func TestWritersOfOneKeyLandEveryVersionWithGaplessSeqs(t *testing.T) {
	n, url := env.SharedAPI(t)
	c, err := client.New(url, env.Token(t, n, auth.NewToken{Org: "acme"}),
		client.WithRetry(client.Retry{InitialInterval: time.Millisecond, MaxInterval: 20 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	ns := testenv.Unique(t, "onekey")
	const writers, each = 8, 5
	var mu sync.Mutex
	var seqs []int64
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each && errs[w] == nil; i++ {
				a, err := c.Set(context.Background(), ns, "shared", client.SetRequest{Value: fmt.Sprintf("writer %d says %d", w, i)})
				if err == nil && !a.Written {
					err = fmt.Errorf("answered %+v", a)
				}
				if errs[w] = err; err == nil {
					mu.Lock()
					seqs = append(seqs, a.Seq)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", w, err)
		}
	}
	slices.Sort(seqs)
	for i, s := range seqs {
		if s != seqs[0]+int64(i) {
			t.Fatalf("seqs %v: a hole or a repeat at %d", seqs, i)
		}
	}
	hist, err := c.History(context.Background(), ns, "shared", client.Identity{})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Versions) != writers*each {
		t.Fatalf("%d versions in the history, want the %d writes", len(hist.Versions), writers*each)
	}
}

// A write's answer names every peer its verdict looked at. A peer out of reach is named
// as the search index has it, without a read of its head; one in reach is the head
// the verdict judged. Both carry the memory's id.
func TestAWritesAnswerNamesItsPeersNearAndFar(t *testing.T) {
	n, url := env.SharedAPI(t)
	c := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"})).Typed(t)
	ctx := context.Background()
	ns := testenv.Unique(t, "peers")
	far, err := c.Set(ctx, ns, "garden", client.SetRequest{Value: "the garden gate squeaks when it rains"})
	if err != nil {
		t.Fatal(err)
	}
	near, err := c.Set(ctx, ns, "office", client.SetRequest{Value: "the office is on the fourth floor of the tower"})
	if err != nil {
		t.Fatal(err)
	}
	// A search passes the barrier once the index holds both: the write's peer read sees them.
	if _, err := c.Search(ctx, ns, client.SearchRequest{Query: "office"}); err != nil {
		t.Fatal(err)
	}
	a, err := c.Set(ctx, ns, "office-2", client.SetRequest{Value: "the office is on the fifth floor of the tower"})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]client.JudgedPeer{}
	for _, p := range a.Peers {
		byKey[p.MemoryKey] = p
	}
	if p := byKey["garden"]; p.MemoryID != far.MemoryID || p.Verdict != "below_threshold" || p.Cosine >= 0.5 {
		t.Errorf("the far peer: %+v, want memory %s below the threshold", p, far.MemoryID)
	}
	if p := byKey["office"]; p.MemoryID != near.MemoryID || p.Verdict == "below_threshold" {
		t.Errorf("the near peer: %+v, want memory %s judged in reach; answer %+v", p, near.MemoryID, a)
	}
}

// A write whose gap, round after round, holds more revisions than a commit examines
// (LOOM_PG_ADMISSION_GAP_MAX) is refused with the seeds' one code for excess
// admission work, a retryable 503 ADMISSION_CONTENDED, and commits nothing.
func TestAGapPastTheMaximumAnswersAdmissionContended(t *testing.T) {
	ns := testenv.Unique(t, "gapmax")
	var c *client.Client
	var writing atomic.Bool
	n, url := env.API(t, func(cfg *config.Config) { cfg.Command.AdmissionGapMax = 1 },
		app.WithCommandFaults(command.Faults{BeforeCommit: func() {
			if !writing.CompareAndSwap(false, true) {
				return // the fault's own writes
			}
			defer writing.Store(false)
			for _, k := range []string{"gap-a", "gap-b"} {
				if _, err := c.Set(context.Background(), ns, k, client.SetRequest{Value: "an unrelated fact about " + k}); err != nil {
					t.Errorf("write %s inside the gap: %v", k, err)
				}
			}
		}}))
	c = testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"})).Typed(t)
	_, err := c.Set(context.Background(), ns, "late", client.SetRequest{Value: "the office moved to the harbour"})
	if !testenv.Retryable503(err, client.CodeAdmissionContended) {
		t.Fatalf("a write behind a gap past LOOM_PG_ADMISSION_GAP_MAX: %v, want a retryable 503 ADMISSION_CONTENDED", err)
	}
	if n := testenv.Int(t, env.PG(t), `SELECT count(*) FROM loom.memory_revisions WHERE org = 'acme' AND namespace = $1 AND memory_key = loom.key_ref(org, 'late')`, ns); n != 0 {
		t.Fatalf("%d revisions of the refused write committed", n)
	}
}

// A burst of revisions past LOOM_PG_ADMISSION_GAP_MAX that lands once, while the
// write is judged (a usage fold's, an import's), is not contention: the write waits
// for the process's index to hold the burst, judges itself again against it, and
// commits. The burst's restatement of its value is the peer it merges into.
func TestAOneOffBurstPastTheGapMaximumIsJudgedAndCommits(t *testing.T) {
	ns := testenv.Unique(t, "gapburst")
	const value = "the office moved to the harbour"
	var c *client.Client
	var once atomic.Bool
	var burst client.SetAnswer
	n, url := env.API(t, func(cfg *config.Config) { cfg.Command.AdmissionGapMax = 1 },
		app.WithCommandFaults(command.Faults{BeforeCommit: func() {
			if !once.CompareAndSwap(false, true) {
				return
			}
			for _, k := range []string{"burst-a", "burst-b", "burst-c"} {
				v := "an unrelated fact about " + k
				if k == "burst-c" {
					v = value
				}
				a, err := c.Set(context.Background(), ns, k, client.SetRequest{Value: v})
				if err != nil {
					t.Errorf("write %s inside the gap: %v", k, err)
				}
				if k == "burst-c" && a != nil {
					burst = *a
				}
			}
		}}))
	c = testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: "acme"})).Typed(t)
	a, err := c.Set(context.Background(), ns, "late", client.SetRequest{Value: value})
	if err != nil {
		t.Fatalf("a write behind a one-off burst past LOOM_PG_ADMISSION_GAP_MAX: %v, want it judged and committed", err)
	}
	if a.Verdict != "merge" || a.MergedInto == nil || a.MergedInto.MemoryID != burst.MemoryID {
		t.Fatalf("the write after the burst: verdict %q merged into %+v, want a merge into the burst's restatement %s: its verdict did not see the burst",
			a.Verdict, a.MergedInto, burst.MemoryID)
	}
}

package query

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/memrow"
)

var testWeights = Weights{Vector: 0.3, Lexical: 0.4, Key: 0.3, Graph: 0.2}

func hit(key string, score, coverage float64) legHit {
	return legHit{id: memrow.Identity{Namespace: "n", Agent: "-", UserID: "-", SessionID: "-", MemoryKey: key}, score: score, coverage: coverage}
}

func TestFuseRanksRowsTwoLegsAgreeOn(t *testing.T) {
	legs := map[Leg][]legHit{
		LegVector:  {hit("both", 0.6, 0), hit("vector-only", 0.7, 0)},
		LegLexical: {hit("both", 4.0, 0.8), hit("lexical-only", 5.0, 1)},
	}
	for _, mode := range []Mode{ModeWeighted, ModeRRF} {
		pool := fuse(legs, mode, testWeights)
		if pool[0].identity.MemoryKey != "both" {
			t.Fatalf("%s: top %s, want the row both legs found", mode, pool[0].identity.MemoryKey)
		}
		if len(pool) != 3 {
			t.Fatalf("%s: %d candidates", mode, len(pool))
		}
	}
}

func TestChunkFoldsOntoItsRow(t *testing.T) {
	legs := map[Leg][]legHit{
		LegVector: {hit("long", 0.2, 0)},
		LegChunk:  {hit("long", 0.8, 0), hit("long", 0.5, 0)},
	}
	pool := fuse(legs, ModeWeighted, testWeights)
	if len(pool) != 1 || pool[0].scores.get(LegVector) != 0.8 {
		t.Fatalf("chunk hits did not fold onto their row: %+v", pool[0].scores)
	}
}

func TestPriorIsCappedAndOnlyReordersNearTies(t *testing.T) {
	now := time.Now()
	strong := prior(priorInput{confidence: 1, reinforcement: 100, tagHits: 5, updatedAt: now, recency: true, now: now}, 0.05)
	if strong > 0.05 || strong < 0.04 {
		t.Fatalf("prior %v, want capped near 0.05", strong)
	}
	weak := prior(priorInput{confidence: 0, now: now, updatedAt: now.Add(-1000 * time.Hour)}, 0.05)
	if weak >= 0 || math.Abs(weak) > 0.05 {
		t.Fatalf("low-confidence prior %v", weak)
	}
	// A near tie (1% apart) may be reordered; a clear gap (20%) may not.
	if 0.50*(1+strong) <= 0.505*(1+weak) {
		t.Fatal("a prior cannot reorder a near tie")
	}
	if 0.50*(1+strong) >= 0.60*(1+weak) {
		t.Fatal("a prior lifted a weak match over a clearly stronger one")
	}
}

// TestFuseKeepsIdentitiesOfOneKeyApart: rows of one memory key under other
// namespaces, users or sessions are candidates of their own, each with its legs'
// scores; one identity found by two legs is one candidate.
func TestFuseKeepsIdentitiesOfOneKeyApart(t *testing.T) {
	mine := hit("city", 0.9, 0)
	other := mine
	other.id.Namespace = "m"
	theirs := mine
	theirs.id.UserID = "u2"
	legs := map[Leg][]legHit{
		LegVector:  {mine, other, theirs},
		LegLexical: {hit("city", 3, 1)},
	}
	pool := fuse(legs, ModeWeighted, testWeights)
	if len(pool) != 3 {
		t.Fatalf("%d candidates, want 3 (one identity per namespace and user)", len(pool))
	}
	for _, c := range pool {
		lexical := c.scores.get(LegLexical)
		if (c.identity == mine.id) != (lexical == 3) {
			t.Fatalf("%+v: lexical score %v; only the identity the lexical leg found has it", c.identity, lexical)
		}
	}
	if pool[0].identity != mine.id {
		t.Fatalf("top %+v, want the identity both legs found", pool[0].identity)
	}
}

// BenchmarkFuse fuses four legs of a 100k-memory search's pools (266 hits each, half
// of them found by more than one leg).
func BenchmarkFuse(b *testing.B) {
	legs := map[Leg][]legHit{}
	for i, leg := range []Leg{LegVector, LegChunk, LegLexical, LegKey} {
		for j := range 266 {
			legs[leg] = append(legs[leg], hit(fmt.Sprintf("memory.%d", j+i*133), 1/float64(j+1), 0.5))
		}
	}
	for b.Loop() {
		fuse(legs, ModeWeighted, Weights{Vector: 0.6, Lexical: 0.25, Key: 0.15})
	}
}

// Rows a leg scores alike are ranked by what the other legs found, then by identity,
// never by the pool's order (a map's): the same search answers the same every time.
func TestRRFBreaksALegsTiesTheSameEveryTime(t *testing.T) {
	var lexical, vector []legHit
	for i := range 40 {
		lexical = append(lexical, hit(fmt.Sprintf("tie-%02d", i), 3.0, 1))
	}
	vector = append(vector, hit("tie-17", 0.4, 0))
	legs := map[Leg][]legHit{LegLexical: lexical, LegVector: vector}
	order := func() string {
		var keys []string
		for _, c := range fuse(legs, ModeRRF, testWeights) {
			keys = append(keys, fmt.Sprintf("%s=%.6f", c.identity.MemoryKey, c.fused))
		}
		return strings.Join(keys, " ")
	}
	first := order()
	if !strings.HasPrefix(first, "tie-17=") {
		t.Fatalf("the tie the vector leg also found is not first: %s", first)
	}
	for range 20 {
		if got := order(); got != first {
			t.Fatalf("the same legs fused twice:\n%s\n%s", first, got)
		}
	}
}

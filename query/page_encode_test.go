package query

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/loomplane/loom/internal/memrow"
)

// The parked pool's own encoder writes what encoding/json writes of the same
// candidates, so a page parked by one process version is read by another.
func TestParkedPoolEncodesAsEncodingJSON(t *testing.T) {
	odd := "quote\" back\\slash <tag> & \n\t\r\x01 é 日本 \u2028\u2029 bad\xffbyte"
	pool := []*candidate{
		{identity: memrow.Identity{Org: "o", Namespace: "ns", Agent: odd, UserID: "u", SessionID: "", MemoryKey: "k.1"},
			contentSHA256: "ab12", memoryType: "fact", scores: map[Leg]float64{LegVector: 0.8123456789, LegLexical: 12.5, LegKey: 0, LegDate: 1},
			coverage: 0.25, fused: 1e-7, relevance: 3e21},
		{identity: memrow.Identity{Namespace: odd}, scores: map[Leg]float64{}, fused: -0.5, relevance: math.SmallestNonzeroFloat64},
		{identity: memrow.Identity{MemoryKey: "nil scores"}, fused: 123456789.125},
	}
	got, err := appendParkedPool(nil, pool)
	if err != nil {
		t.Fatal(err)
	}
	var parked []parkedCandidate
	for _, c := range pool {
		parked = append(parked, parkedCandidate{Identity: c.identity, SHA: c.contentSHA256, Type: c.memoryType, Scores: c.scores,
			Coverage: c.coverage, Fused: c.fused, Relevance: c.relevance})
	}
	want, err := json.Marshal(parked)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("parked pool\n got %s\nwant %s", got, want)
	}
	if _, err := appendParkedPool(nil, []*candidate{{fused: math.NaN()}}); err == nil {
		t.Fatal("a NaN score was parked; encoding/json refuses it")
	}
}

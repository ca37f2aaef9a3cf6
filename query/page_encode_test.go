package query

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/loomplane/loom/internal/memrow"
)

func parkedPoolFixture() []*candidate {
	odd := "quote\" back\\slash <tag> & \n\t é 日本 \u2028 bad\xffbyte"
	return []*candidate{
		{identity: memrow.Identity{Org: "o", Namespace: "ns", Agent: odd, UserID: "u1", MemoryKey: "k.1"},
			contentSHA256: strings.Repeat("ab", 32), memoryType: "fact",
			scores: legScoresOf(map[Leg]float64{LegVector: 0.8123456789, LegLexical: 12.5, LegKey: 0, LegDate: 1}), coverage: 0.25, fused: 1e-7, relevance: 3e21},
		{identity: memrow.Identity{Namespace: "ns", UserID: "u2", MemoryKey: "k.2"}, contentSHA256: "not hex",
			fused: -0.5, relevance: math.SmallestNonzeroFloat64},
		{identity: memrow.Identity{Namespace: "other", UserID: "u1", MemoryKey: "nil scores"}, contentSHA256: strings.Repeat("AB", 32), fused: 123456789.125},
	}
}

// A parked pool reads back as it was parked, score for score; a pool parked by an older
// process (its blob inside the pool column, or candidate objects) is still read.
func TestParkedPoolRoundTrips(t *testing.T) {
	pool := parkedPoolFixture()
	scopes, packed, err := packPool(pool)
	if err != nil {
		t.Fatal(err)
	}
	got, err := unpackPool(scopes, packed)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, pool) {
		t.Fatalf("unpacked pool differs:\n got %+v\nwant %+v", got, pool)
	}
	inColumn := []byte(strings.TrimSuffix(string(scopes), "]") + `,{"packed":"` + base64.StdEncoding.EncodeToString(packed) + `"}]`)
	if got, err = unpackPool(inColumn, nil); err != nil || !reflect.DeepEqual(got, pool) {
		t.Fatalf("a blob in the pool column: %v\n got %+v\nwant %+v", err, got, pool)
	}

	// JSON holds valid UTF-8 only: the older shape is read back from a pool without the odd byte.
	pool[0].identity.Agent = strings.ToValidUTF8(pool[0].identity.Agent, "\uFFFD")
	var old []parkedCandidate
	for _, c := range pool {
		old = append(old, parkedCandidate{Identity: c.identity, SHA: c.contentSHA256, Type: c.memoryType, Scores: c.scores.asMap(),
			Coverage: c.coverage, Fused: c.fused, Relevance: c.relevance})
	}
	oldRaw, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = unpackPool(oldRaw, nil); err != nil || !reflect.DeepEqual(got, pool) {
		t.Fatalf("an older pool: %v\n got %+v\nwant %+v", err, got, pool)
	}

	if _, _, err := packPool([]*candidate{{fused: math.NaN()}}); err == nil {
		t.Fatal("a NaN score was parked")
	}
	for cut := 1; cut < 40; cut++ {
		blob, _ := packCandidates(pool)
		if _, err := unpackCandidates(blob[:len(blob)-cut]); err == nil {
			t.Fatalf("a blob cut %d bytes short was read", cut)
		}
	}
}

// The pool column holds, for each scope its candidates are in, the element an erasure's
// containment test looks for: {"id": {"namespace": ns, "user_id": user}}.
func TestPackedPoolNamesItsScopesForErasure(t *testing.T) {
	raw, _, err := packPool(parkedPoolFixture())
	if err != nil {
		t.Fatal(err)
	}
	var elements []map[string]any
	if err := json.Unmarshal(raw, &elements); err != nil {
		t.Fatal(err)
	}
	var scopes []string
	for _, el := range elements {
		if id, ok := el["id"].(map[string]any); ok {
			scopes = append(scopes, id["namespace"].(string)+"/"+id["user_id"].(string))
		}
	}
	if want := []string{"ns/u1", "ns/u2", "other/u1"}; !reflect.DeepEqual(scopes, want) {
		t.Fatalf("scopes %v, want %v", scopes, want)
	}
}

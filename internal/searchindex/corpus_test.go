package searchindex

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand"
	"time"

	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/embed"
)

// A generated corpus: sentences about people, places and things, embedded with the
// hash embedder as production's default is, so vectors and terms look like Loom's.
var (
	people  = []string{"alice", "bob", "carol", "dmitri", "esther", "farouk", "grace", "hiro", "ines", "jonas", "kwame", "lucia", "mateo", "nadia", "oskar", "priya"}
	verbs   = []string{"prefers", "bought", "visited", "booked", "cancelled", "scheduled", "moved", "shared", "reviewed", "ordered", "returned", "approved"}
	objects = []string{"a window seat", "the quarterly report", "dark mode in the editor", "a vegetarian meal", "the team offsite", "two tickets to lisbon",
		"the invoice for march", "a standing desk", "the onboarding checklist", "a hotel near the station", "the security audit", "a new laptop",
		"green tea in the morning", "the design review", "a rental car", "the budget spreadsheet"}
	places = []string{"berlin", "lisbon", "tokyo", "nairobi", "toronto", "madrid", "oslo", "lima", "seoul", "cairo", "dublin", "austin"}
	times  = []string{"on monday", "last week", "every friday", "in january", "after the launch", "before the holidays", "at noon", "next quarter"}
)

func sentence(rng *rand.Rand) string {
	s := fmt.Sprintf("%s %s %s in %s %s", people[rng.Intn(len(people))], verbs[rng.Intn(len(verbs))],
		objects[rng.Intn(len(objects))], places[rng.Intn(len(places))], times[rng.Intn(len(times))])
	if rng.Intn(3) == 0 {
		s += fmt.Sprintf(" with %s about %s", people[rng.Intn(len(people))], objects[rng.Intn(len(objects))])
	}
	return s
}

func shaOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// corpus generates n memories' first revisions, seqs 1..n.
func corpus(n int, seed int64) []*Revision {
	rng := rand.New(rand.NewSource(seed))
	texts := make([]string, n)
	for i := range texts {
		texts[i] = sentence(rng)
	}
	vecs, _ := embed.NewHash(384).Embed(context.Background(), texts)
	out := make([]*Revision, n)
	t0 := time.Unix(1_700_000_000, 0).UTC()
	for i := range out {
		out[i] = &Revision{Seq: int64(i + 1), MemoryID: uuid.NewString(), Version: int64(i + 1), Agent: "-",
			UserID: fmt.Sprintf("u%d", i%8), SessionID: "-", MemoryType: "fact", Status: "active", Sensitivity: "normal",
			ContentSHA256: shaOf(texts[i]), UpdatedAt: t0, EmbeddingDim: 384, MemoryKey: fmt.Sprintf("m.%d.%s", i, people[i%len(people)]),
			Text: texts[i], Tags: []string{places[i%len(places)]}, Vector: vecs[i]}
	}
	return out
}

func records(revs []*Revision) []Record {
	out := make([]Record, len(revs))
	for i, r := range revs {
		out[i] = Record{Seq: r.Seq, Revision: r}
	}
	return out
}

func queryVector(text string) []float32 {
	v, _ := embed.NewHash(384).Embed(context.Background(), []string{text})
	return v[0]
}

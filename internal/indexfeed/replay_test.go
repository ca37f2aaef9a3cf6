package indexfeed

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/revisions"
	"github.com/loomplane/loom/internal/searchindex"
)

// sealedTopic makes n sealed revisions over 8 namespaces, as the relay publishes them
// (a value's vector and its key's, as a key with letters has), with their data keys.
func sealedTopic(tb testing.TB, n int) ([]*kgo.Record, map[string][]byte) {
	tb.Helper()
	texts := make([]string, 500)
	for i := range texts {
		texts[i] = fmt.Sprintf("memory %d: user %d prefers option %d for the %s", i, i%97, i%13, []string{"editor", "flight", "meal", "hotel"}[i%4])
	}
	vecs, _ := embed.NewHash(384).Embed(tb.Context(), texts)
	recs := make([]*kgo.Record, n)
	keys := map[string][]byte{}
	seqs := map[string]int64{}
	dashRef, _ := events.UserRef(make([]byte, events.UserRefKeySize), "-")
	now := time.Now()
	for i := range recs {
		ns := fmt.Sprintf("ns%d", i%8)
		seqs[ns]++
		value := []byte(strconv.Quote(texts[i%len(texts)]))
		env := &events.Envelope{Version: events.EnvelopeVersion, ID: events.RecordID("acme", ns, seqs[ns]), Type: events.TypeWritten,
			Org: "acme", Namespace: ns, Seq: seqs[ns], CommittedAt: now, Revision: &events.Revision{Op: "memory.set",
				MemoryID: uuid.NewString(), Version: int64(i + 1), AgentRef: "-", UserRef: dashRef, SessionRef: "-", MemoryType: "fact",
				Status: "active", Actor: "bench", SourceClass: "direct",
				EmbeddingModel: "hash-v1-384", EmbeddingDim: 384, CreatedAt: now, UpdatedAt: now}}
		key, _ := events.NewDataKey()
		var err error
		env.Sealed, err = events.Seal(key, env.ID, &events.Content{MemoryKey: fmt.Sprintf("k%d", i), Value: value,
			Tags: []string{"bench"}, Embedding: vecs[i%len(vecs)], KeyEmbedding: vecs[(i+7)%len(vecs)], UserID: "-", ContentSHA256: memrow.ContentSHA256(value), Agent: "-", SessionID: "-"})
		if err != nil {
			tb.Fatal(err)
		}
		b, err := events.Encode(env)
		if err != nil {
			tb.Fatal(err)
		}
		keys[env.ID] = key
		recs[i] = &kgo.Record{Key: events.RecordKey("acme", ns), Value: b, Partition: int32(i % 4), Offset: int64(i / 4)}
	}
	return recs, keys
}

// BenchmarkReplayBatch is the follower's work per record without the broker or
// Postgres: decode, open, and apply to the index, in batches of 5000.
func BenchmarkReplayBatch(b *testing.B) {
	recs, keys := sealedTopic(b, 20000)
	cpu := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		x := searchindex.New(searchindex.Config{})
		for from := 0; from < len(recs); from += 5000 {
			decodeBatch(recs[from:min(from+5000, len(recs))], func(*kgo.Record, error) { b.Fatal("undecodable") }).
				applyTo(x, keys, func(revisions.Unopened) { b.Fatal("unopened") })
		}
		x.Close()
	}
	b.ReportMetric(float64(len(recs)*b.N)/b.Elapsed().Seconds(), "records/s")
	// On a shared machine the wall clock says little; the CPU the process spent does.
	b.ReportMetric(float64(len(recs)*b.N)/(cpuTime()-cpu).Seconds(), "records/cpu-s")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

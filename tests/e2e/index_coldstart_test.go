package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/indexfeed"
	"github.com/loomplane/loom/internal/kafka"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/searchindex"
	"github.com/loomplane/loom/tests/testenv"
)

// A process warms its index by replaying the topic. This measures the replay (records/s
// into the index, decoding, one key query per batch and opening included) against a bare
// kgo read of the same topic, on a topic of generated sealed revisions (384-dimension
// vectors) over 8 namespaces. It prints, it does not judge: LOOM_COLDSTART_RECORDS sets
// the size (default 20000).
func TestIndexColdStartReplayRate(t *testing.T) {
	n := 20000
	if s := os.Getenv("LOOM_COLDSTART_RECORDS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	topic := env.CreateTopic(t, nil)
	org := testenv.Unique(t, "cold")
	pool := env.PG(t)
	ctx := context.Background()

	texts := make([]string, 2000)
	for i := range texts {
		texts[i] = fmt.Sprintf("memory %d: user %d prefers option %d for the %s", i, i%97, i%13, []string{"editor", "flight", "meal", "hotel"}[i%4])
	}
	vecs, _ := embed.NewHash(384).Embed(ctx, texts)
	cl, err := kafka.NewClient(env.Stack.Kafka.Brokers(), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	start := time.Now()
	var keys [][]any
	seqs := map[string]int64{}
	dashRef, _ := events.UserRef(make([]byte, events.UserRefKeySize), "-")
	for i := 0; i < n; i++ {
		ns := fmt.Sprintf("ns%d", i%8)
		seqs[ns]++
		seq := seqs[ns]
		value := []byte(strconv.Quote(texts[i%len(texts)]))
		env := &events.Envelope{Version: events.EnvelopeVersion, ID: events.RecordID(org, ns, seq), Type: events.TypeWritten,
			Org: org, Namespace: ns, Seq: seq, CommittedAt: time.Now(), Revision: &events.Revision{Op: "memory.set",
				MemoryID: uuid.NewString(), Version: int64(i + 1), AgentRef: "-", UserRef: dashRef, SessionRef: "-", MemoryType: "fact",
				Status: "active", Actor: "bench", SourceClass: "agent",
				EmbeddingModel: "hash-v1-384", EmbeddingDim: 384, CreatedAt: time.Now(), UpdatedAt: time.Now()}}
		key, _ := events.NewDataKey()
		env.Sealed, err = events.Seal(key, env.ID, &events.Content{MemoryKey: fmt.Sprintf("k%d", i), Value: value,
			Tags: []string{"bench"}, Embedding: vecs[i%len(vecs)], UserID: "-", ContentSHA256: memrow.ContentSHA256(value), Agent: "-", SessionID: "-"})
		if err != nil {
			t.Fatal(err)
		}
		b, err := events.Encode(env)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, []any{org, ns, seq, key})
		cl.Produce(ctx, &kgo.Record{Key: events.RecordKey(org, ns), Value: b}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"loom", "revision_keys"}, []string{"org", "namespace", "seq", "data_key"}, pgx.CopyFromRows(keys)); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d sealed revisions and their keys in %s", n, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	read, err := kafka.ReadTopic(ctx, env.Stack.Kafka.Brokers(), topic, func(*kgo.Record) {})
	if err != nil || read != int64(n) {
		t.Fatalf("bare read: %d records, %v", read, err)
	}
	bare := time.Since(start)

	idx := searchindex.New(searchindex.Config{})
	defer idx.Close()
	feed := indexfeed.New(indexfeed.Config{Brokers: env.Stack.Kafka.Brokers(), Topic: topic}, pool, idx, slog.New(slog.NewTextHandler(io.Discard, nil)))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start = time.Now()
	go func() { done <- feed.Run(runCtx) }()
	select {
	case <-feed.Warmed():
	case <-time.After(10 * time.Minute):
		t.Fatalf("not warm: %+v", feed.Progress())
	}
	warm := time.Since(start)
	cancel()
	<-done
	st := idx.Stats()
	if st.Entries != int64(n) || st.Vectors != int64(n) {
		t.Fatalf("the index holds %d entries, %d vectors; want %d", st.Entries, st.Vectors, n)
	}
	t.Logf("cold start of %d records: bare kgo read %s (%.0f records/s); replay into the index %s (%.0f records/s, %.2f× the bare read); %d bytes per memory",
		n, bare.Round(time.Millisecond), float64(n)/bare.Seconds(), warm.Round(time.Millisecond), float64(n)/warm.Seconds(),
		warm.Seconds()/bare.Seconds(), st.Bytes/int64(n))
}

package bench

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/loomplane/loom/events"
)

// BenchmarkTurnsRecordBytes encodes the memory.turns_observed record of one
// memory.observe call of the recall and pack scenarios (a session of 100 turns of
// sentence()'s text, each sealed under its own data key) and reports the record's value
// per turn: what a kept turn costs on the topic, beside its rows in Postgres (the
// recall scenario's bytes). The Kafka record adds its key and CloudEvents headers once
// per call, not per turn.
func BenchmarkTurnsRecordBytes(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	recordID := events.RecordID("bench", "ns", 1)
	items := make([]events.TurnMeta, recallSessionTurns)
	text := 0
	for i := range items {
		key, err := events.NewDataKey()
		if err != nil {
			b.Fatal(err)
		}
		t := events.TurnText{Text: sentence(rng), Agent: "-", SessionID: "s0000"}
		text += len(t.Text)
		id := uuid.NewString()
		sealed, err := events.SealTurn(key, recordID, id, t)
		if err != nil {
			b.Fatal(err)
		}
		items[i] = events.TurnMeta{TurnID: id, Role: "user", MessageIndex: i, OccurredAt: time.Unix(1_780_000_000, 0).UTC(), Sealed: sealed}
	}
	env := &events.Envelope{Version: events.EnvelopeVersion, ID: recordID, Type: events.TypeTurnsObserved, Org: "bench", Namespace: "ns",
		Seq: 1, CommittedAt: time.Unix(1_780_000_000, 0).UTC(),
		Turns: &events.Turns{AgentRef: "-", UserRef: fmt.Sprintf("%064x", 7), SessionRef: fmt.Sprintf("%064x", 8), Source: "observe", Items: items}}
	var size int
	for b.Loop() {
		v, err := events.Encode(env)
		if err != nil {
			b.Fatal(err)
		}
		size = len(v)
	}
	b.ReportMetric(float64(size)/float64(len(items)), "B/turn")
	b.ReportMetric(float64(text)/float64(len(items)), "text-B/turn")
}

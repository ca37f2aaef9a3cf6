package events

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// benchRecord is a record as the relay publishes a typical memory: a short value with
// 384-dim value and key vectors, sealed, in its envelope; with its data key.
func benchRecord(tb testing.TB) (value, key []byte, id string) {
	tb.Helper()
	vec := func(seed int) Vector {
		v := make(Vector, 384)
		for i := range v {
			v[i] = float32(math.Sin(float64(seed*384+i))) / 19.6
		}
		return v
	}
	id = RecordID("acme", "support", 4242)
	text := json.RawMessage(strconv.Quote("the customer prefers a window seat on morning flights to Lisbon"))
	sum := sha256.Sum256(text)
	content := &Content{MemoryKey: "travel.seat_preference", Value: text, Tags: []string{"travel", "preference"},
		Embedding: vec(1), KeyEmbedding: vec(2), UserID: "u-42", ContentSHA256: hex.EncodeToString(sum[:]),
		Agent: "travel-bot", SessionID: "s-9"}
	key, err := NewDataKey()
	if err != nil {
		tb.Fatal(err)
	}
	sealed, err := Seal(key, id, content)
	if err != nil {
		tb.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 8, 15, 0, 123456789, time.UTC)
	userRef, _ := UserRef(testUserRefKey, "u-42")
	agentRef, _ := AgentRef(testUserRefKey, "travel-bot")
	sessionRef, _ := SessionRef(testUserRefKey, "s-9")
	value, err = Encode(&Envelope{Version: EnvelopeVersion, ID: id, Type: TypeWritten, Org: "acme", Namespace: "support",
		Seq: 4242, CommittedAt: at, Revision: &Revision{Op: "memory.set", MemoryID: "0193a5c2-7f4e-7c1a-9d2b-5e8f1a2b3c4d",
			Version: at.UnixNano(), AgentRef: agentRef, UserRef: userRef, SessionRef: sessionRef, MemoryType: "preference",
			Status: "active", Confidence: 0.9, Actor: "agent:travel-bot",
			SourceClass: "agent", EmbeddingModel: "minilm-l6", EmbeddingDim: 384, CreatedAt: at, UpdatedAt: at,
			RequestID: "req-7"}, Sealed: sealed})
	if err != nil {
		tb.Fatal(err)
	}
	return value, key, id
}

// BenchmarkDecodeOpen is what a follower spends on one record before it applies it:
// the envelope decoded, then its content opened.
func BenchmarkDecodeOpen(b *testing.B) {
	value, key, id := benchRecord(b)
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	defer reportCPU(b, cpuTime())
	for b.Loop() {
		env, err := Decode(value)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Open(key, id, env.Sealed); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkDecode(b *testing.B) {
	value, _, _ := benchRecord(b)
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	defer reportCPU(b, cpuTime())
	for b.Loop() {
		if _, err := Decode(value); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	value, key, id := benchRecord(b)
	env, err := Decode(value)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Open(key, id, env.Sealed); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenInPlace is BenchmarkOpen decrypting over the ciphertext (a fresh copy
// of it each time, as a fresh decode gives).
func BenchmarkOpenInPlace(b *testing.B) {
	value, key, id := benchRecord(b)
	env, err := Decode(value)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, len(env.Sealed.Ciphertext))
	b.ReportAllocs()
	defer reportCPU(b, cpuTime())
	for b.Loop() {
		s := *env.Sealed
		s.Ciphertext = buf
		copy(buf, env.Sealed.Ciphertext)
		if _, err := OpenInPlace(key, id, &s); err != nil {
			b.Fatal(err)
		}
	}
}

// reportCPU reports the process's CPU time an op since start: on a shared machine the
// wall clock says little, the CPU spent (the GC's included) more.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

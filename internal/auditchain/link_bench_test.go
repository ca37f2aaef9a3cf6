package auditchain

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkLink is the chain's CPU per audit row, the projector's whole share of it
// beside one read of the namespaces' last hashes per batch (`loomd bench chain`
// measures memory.set with the chain on and off).
func BenchmarkLink(b *testing.B) {
	rows := make([]*Row, 1000)
	for i := range rows {
		rows[i] = &Row{Org: "acme", Namespace: "support", Seq: uint64(i + 1), Op: "memory.set", EventType: "memory.written",
			OccurredAt: time.Unix(1_790_000_000, 0), Actor: "token:ops", Agent: "agent-7", SessionID: "s-1",
			MemoryID: fmt.Sprintf("0190a5d2-7c1e-7000-8000-%012d", i), Version: uint64(i), Status: "active",
			RequestID: "req-1", SubjectCommitment: "5f2b8c0e9d4a7b6c1e3f5a7b9c0d2e4f6a8b0c1d3e5f7a9b1c3d5e7f9a0b2c4"}
	}
	b.ResetTimer()
	for b.Loop() {
		Link("", rows)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}

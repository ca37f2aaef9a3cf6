package gcpace

import (
	"context"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercentForLetsASmallHeapGrowToTheFloorAndABigOneAtGosPace(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{live: 32 * mib, floor: 256 * mib, want: 700}, // the next collection at 256 MiB
		{live: 128 * mib, floor: 256 * mib, want: 100},
		{live: 1024 * mib, floor: 256 * mib, want: 100}, // past the floor: Go's own pace
		{live: 0, floor: 256 * mib, want: 6300},         // an empty heap counts as Go's smallest, 4 MiB
	} {
		if got := PercentFor(c.live, c.floor); got != c.want {
			t.Errorf("PercentFor(%d MiB, %d MiB) = %d, want %d", c.live/mib, c.floor/mib, got, c.want)
		}
	}
}

// Under a floor a process with a small live heap is next collected when its heap
// reaches the floor, not when it doubles (Go's own pace: tens of MiB here).
func TestRunLetsASmallHeapGrowToTheFloorBeforeItIsCollected(t *testing.T) {
	const floor = 512 << 20
	runtime.GC()
	atGosPace := read("/gc/heap/goal:bytes")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Run(ctx, floor, time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()
	for read("/gc/gogc:percent") == goPercent {
		time.Sleep(time.Millisecond)
	}
	floored := read("/gc/heap/goal:bytes")
	if atGosPace > floor/4 || floored < floor*9/10 || floored > floor*11/10 {
		t.Fatalf("the next collection at %d MiB of heap under a 512 MiB floor, at %d MiB at Go's pace; want about 512 and under 128",
			floored>>20, atGosPace>>20)
	}
}

func read(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A live heap that grows past half the floor is paced as Go paces it from the
// collection that finds it, not at the next look of a slow fallback interval.
func TestRunPacesAHeapThatJumpedFromTheCollectionThatFindsIt(t *testing.T) {
	const floor = 64 << 20
	runtime.GC()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Run(ctx, floor, time.Hour); close(done) }()
	defer func() { cancel(); <-done }()
	for read("/gc/gogc:percent") == goPercent {
		time.Sleep(time.Millisecond)
	}
	held := make([][]byte, 48)
	for i := range held {
		held[i] = make([]byte, 1<<20)
	}
	runtime.GC()
	deadline := time.Now().Add(5 * time.Second)
	for read("/gc/gogc:percent") != goPercent && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if p := read("/gc/gogc:percent"); p != goPercent {
		t.Fatalf("a 48 MiB live heap under a 64 MiB floor is collected at percent %d after its collection, want Go's %d", p, goPercent)
	}
	runtime.KeepAlive(held)
}

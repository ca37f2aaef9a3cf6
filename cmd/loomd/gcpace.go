package main

import (
	"context"
	"os"
	"runtime/debug"
	"time"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/gcpace"
)

// gcPaceInterval is how often the collector's pace is looked at should a collection's
// wake-up (gcpace.Run) be missed.
const gcPaceInterval = time.Second

// paceGC applies the collector's settings (LOOM_GC_HEAP_FLOOR_MB, LOOM_MEMORY_LIMIT_MB)
// until ctx ends. Go's GOGC and GOMEMLIMIT, when set, are the operator's and win.
func paceGC(ctx context.Context, rt config.Runtime) {
	if rt.MemoryLimitMB > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(int64(rt.MemoryLimitMB) << 20)
	}
	if rt.HeapFloorMB > 0 && os.Getenv("GOGC") == "" {
		go gcpace.Run(ctx, uint64(rt.HeapFloorMB)<<20, gcPaceInterval)
	}
}

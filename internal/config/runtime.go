package config

import "errors"

// Runtime is how the process's Go garbage collector paces itself. Go's own GOGC and
// GOMEMLIMIT, when set, are the operator's word and win over these.
type Runtime struct {
	// HeapFloorMB is the heap a collection may wait for while the live heap is small
	// (LOOM_GC_HEAP_FLOOR_MB): Go collects each time the heap doubles its live part, so
	// a process whose live heap is tens of MiB collects many times a second under
	// writes, each time marking the whole live heap again. With a floor the collector
	// lets the heap grow to this many MiB (never to less than twice the live heap, Go's
	// own pace), so a small heap is collected less often at no more than this much
	// memory. 0: Go's own pace.
	HeapFloorMB int
	// MemoryLimitMB is a soft limit on the Go runtime's memory (LOOM_MEMORY_LIMIT_MB,
	// Go's debug.SetMemoryLimit): near it the collector runs more often whatever the
	// floor allows. 0: none.
	MemoryLimitMB int
}

func readRuntime(r *reader) Runtime {
	return Runtime{HeapFloorMB: r.int("LOOM_GC_HEAP_FLOOR_MB", 128), MemoryLimitMB: r.int("LOOM_MEMORY_LIMIT_MB", 0)}
}

// Validate checks the collector's settings.
func (rt Runtime) Validate() error {
	var errs []error
	if rt.HeapFloorMB < 0 {
		errs = append(errs, errors.New("LOOM_GC_HEAP_FLOOR_MB must be 0 (Go's own pace) or positive"))
	}
	if rt.MemoryLimitMB < 0 {
		errs = append(errs, errors.New("LOOM_MEMORY_LIMIT_MB must be 0 (none) or positive"))
	}
	return errors.Join(errs...)
}

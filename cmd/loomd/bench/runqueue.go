package bench

import (
	"math"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// waitMark is how long the threads of this process and of the processes under it (the
// embedded Postgres and ClickHouse) had waited, runnable, for a CPU (the run queue),
// and the Go runtime's own scheduling latencies and GC cycles, at one moment: beside a
// tail it says how much of it was the wait for a CPU rather than the work.
type waitMark struct {
	self, rest time.Duration // the run queue's wait: this process's threads, the others'
	sched      *metrics.Float64Histogram
	gcCycles   uint64
}

var waitMetrics = []metrics.Sample{{Name: "/sched/latencies:seconds"}, {Name: "/gc/cycles/total:gc-cycles"}}

// readWait reads the waits so far; the run queue's are zero where /proc is not there.
func readWait() waitMark {
	var m waitMark
	pid := os.Getpid()
	m.self = threadsRunDelay(pid)
	for _, child := range descendants(pid) {
		m.rest += threadsRunDelay(child)
	}
	s := make([]metrics.Sample, len(waitMetrics))
	copy(s, waitMetrics)
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindFloat64Histogram {
		m.sched = s[0].Value.Float64Histogram()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		m.gcCycles = s[1].Value.Uint64()
	}
	return m
}

// threadsRunDelay sums the run-queue wait of a process's live threads
// (/proc/<pid>/task/<tid>/schedstat: time on the CPU, time waiting for one, slices).
func threadsRunDelay(pid int) time.Duration {
	stats, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/[0-9]*/schedstat")
	var d time.Duration
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the thread ended
		}
		if f := strings.Fields(string(b)); len(f) >= 2 {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			d += time.Duration(n)
		}
	}
	return d
}

// descendants lists the live processes under root.
func descendants(root int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	children := map[int][]int{}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		pid, f, ok := statFields(string(b))
		if !ok {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
	}
	var out []int
	var walk func(int)
	walk = func(pid int) {
		for _, c := range children[pid] {
			out = append(out, c)
			walk(c)
		}
	}
	walk(root)
	return out
}

// waitRows adds, per write, the run queue's wait from before to after (a process's
// threads that ended meanwhile, and processes that started, are not counted), the Go
// scheduler's p99 latency over the run and the GC cycles, to res under name.
func waitRows(res *ScenarioResult, name string, before, after waitMark, writes int) {
	per := func(d time.Duration) float64 { return ms(d / time.Duration(max(writes, 1))) }
	res.Rows = append(res.Rows,
		plainRow(name, "run-queue wait ms per write: this process's threads", per(after.self-before.self)),
		plainRow(name, "run-queue wait ms per write: Postgres's and ClickHouse's", per(after.rest-before.rest)),
		plainRow(name, "GC cycles per 1k writes", round(float64(after.gcCycles-before.gcCycles)*1000/float64(max(writes, 1)), 1)))
	if p99, ok := histogramDelta(before.sched, after.sched, 0.99); ok {
		res.Rows = append(res.Rows, plainRow(name, "Go scheduling latency p99 ms (runnable goroutine → running)", ms(p99)))
	}
}

// histogramDelta is the q quantile (a bucket's upper bound) of the counts after minus
// before, two reads of one runtime histogram.
func histogramDelta(before, after *metrics.Float64Histogram, q float64) (time.Duration, bool) {
	if before == nil || after == nil || len(before.Counts) != len(after.Counts) {
		return 0, false
	}
	var total uint64
	for i := range after.Counts {
		total += after.Counts[i] - before.Counts[i]
	}
	if total == 0 {
		return 0, false
	}
	want := uint64(float64(total) * q)
	var seen uint64
	for i := range after.Counts {
		seen += after.Counts[i] - before.Counts[i]
		if seen > want {
			upper := after.Buckets[i+1]
			if math.IsInf(upper, 1) {
				upper = after.Buckets[i]
			}
			return time.Duration(upper * float64(time.Second)), true
		}
	}
	return 0, false
}

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// On a shared machine the wall-clock rates move with the neighbours' load; the CPU a
// piece of work costs moves much less. cpuMark is the CPU this process (the process
// under test, the bench's client and, with the embedded stores, the broker) and the
// ClickHouse server had spent at one moment.
type cpuMark struct {
	self, clickhouse time.Duration
	chKnown          bool
}

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat's CPU times.
const clockTicks = 100

// cpuNow reads the CPU spent so far; ClickHouse's only when the bench started it.
func (r *runner) cpuNow() cpuMark {
	m := cpuMark{self: selfCPU()}
	if r.t.ClickHousePID > 0 {
		m.clickhouse, m.chKnown = procCPU(r.t.ClickHousePID)
	}
	return m
}

// procCPU is a process's user and system time from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	_, f, ok := statFields(string(b))
	if !ok {
		return 0, false
	}
	return ticks(f, 11, 12), true
}

// statFields splits a /proc/<pid>/stat line into its pid and the fields after the
// command name, which may hold spaces (so the split is after its last ')'): f[1] is
// the parent's pid, f[11..14] utime, stime, cutime and cstime.
func statFields(s string) (pid int, f []string, ok bool) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 1 || end < 0 {
		return 0, nil, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	f = strings.Fields(s[end+1:])
	return pid, f, err == nil && len(f) >= 15
}

// ticks sums the fields at idx as CPU time.
func ticks(f []string, idx ...int) time.Duration {
	var t int64
	for _, i := range idx {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		t += n
	}
	return time.Duration(t) * time.Second / clockTicks
}

// cpuUse is CPU time spent so far: by this process (Loom serving in-process, and the
// benchmark's own client), and by it with every process under it (the embedded
// stores: Postgres, ClickHouse), counting their reaped children.
type cpuUse struct {
	self, tree time.Duration
}

// readCPU reads the CPU time used so far; tree is zero where /proc is not there.
func readCPU() cpuUse {
	return cpuUse{self: selfCPU(), tree: treeCPU(os.Getpid())}
}

// selfCPU is the user and system time this process has spent.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (u cpuUse) sub(v cpuUse) cpuUse { return cpuUse{self: u.self - v.self, tree: u.tree - v.tree} }

// treeCPU sums utime, stime, cutime and cstime of root and its descendants.
func treeCPU(root int) time.Duration {
	own, rest := splitTreeCPU(root)
	return own + rest
}

// splitTreeCPU is treeCPU in two: root's own utime and stime, and the rest (its reaped
// children's, and every live descendant's).
func splitTreeCPU(root int) (own, rest time.Duration) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	children := map[int][]int{}
	spent := map[int]time.Duration{}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the process ended
		}
		pid, f, ok := statFields(string(b))
		if !ok {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
		if pid == root {
			own = ticks(f, 11, 12)
			spent[pid] = ticks(f, 13, 14)
			continue
		}
		spent[pid] = ticks(f, 11, 12, 13, 14)
	}
	var walk func(int)
	walk = func(pid int) {
		rest += spent[pid]
		for _, c := range children[pid] {
			walk(c)
		}
	}
	walk(root)
	return own, rest
}

// minus is the CPU spent from before to m.
func (m cpuMark) minus(before cpuMark) cpuMark {
	return cpuMark{self: m.self - before.self, clickhouse: m.clickhouse - before.clickhouse, chKnown: m.chKnown && before.chKnown}
}

// restRate is the CPU a second each process spends at rest, sampled over d.
type restRate struct{ self, clickhouse float64 }

// restRate samples the CPU spent at rest over d.
func (r *runner) restRate(d time.Duration) restRate {
	before := r.cpuNow()
	time.Sleep(d)
	spent := r.cpuNow().minus(before)
	out := restRate{self: spent.self.Seconds() / d.Seconds(), clickhouse: -1}
	if spent.chKnown {
		out.clickhouse = spent.clickhouse.Seconds() / d.Seconds()
	}
	return out
}

// rows adds the rates at rest to res under name: beside a slow run's per-record CPU
// they say how much of it the processes' other work may be (a 5 s sample moves with
// the merges and workers under way, so it is context, not subtracted).
func (rest restRate) rows(res *ScenarioResult, name string) {
	res.Rows = append(res.Rows, plainRow(name, "CPU s per s at rest, before: this process", round(rest.self, 3)))
	if rest.clickhouse >= 0 {
		res.Rows = append(res.Rows, plainRow(name, "CPU s per s at rest, before: ClickHouse", round(rest.clickhouse, 3)))
	}
}

// cpuRows adds the CPU spent from before to after, per 1,000 of what was done (units),
// and the load average, to res under name.
func (r *runner) cpuRows(res *ScenarioResult, name string, before, after cpuMark, units float64, unit string) {
	per := func(d time.Duration) float64 { return round(d.Seconds()*1000/max(units, 1), 3) }
	res.Rows = append(res.Rows, plainRow(name, "CPU s per 1k "+unit+": this process", per(after.self-before.self)))
	if after.chKnown && before.chKnown {
		res.Rows = append(res.Rows, plainRow(name, "CPU s per 1k "+unit+": ClickHouse", per(after.clickhouse-before.clickhouse)))
	}
	if load, ok := load1(); ok {
		res.Rows = append(res.Rows, plainRow(name, "load average (1 min) at the end", load))
	}
}

// load1 is the 1-minute load average.
func load1() (float64, bool) {
	f := strings.Fields(loadAverage())
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuUse is CPU time spent so far: by this process (Loom serving in-process, and the
// benchmark's own client), and by it with every process under it (the embedded
// stores: Postgres, ClickHouse), counting their reaped children.
type cpuUse struct {
	self, tree time.Duration
}

// clockTick is the unit of /proc/<pid>/stat's CPU fields (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// readCPU reads the CPU time used so far; tree is zero where /proc is not there.
func readCPU() cpuUse {
	var ru syscall.Rusage
	var u cpuUse
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		u.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	u.tree = treeCPU(os.Getpid())
	return u
}

func (u cpuUse) sub(v cpuUse) cpuUse { return cpuUse{self: u.self - v.self, tree: u.tree - v.tree} }

// treeCPU sums utime, stime, cutime and cstime of root and its descendants.
func treeCPU(root int) time.Duration {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	children := map[int][]int{}
	ticks := map[int]int64{}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the process ended
		}
		s := string(b)
		// pid (comm) state ppid ...: comm may hold spaces, so split after its last ')'.
		end := strings.LastIndexByte(s, ')')
		open := strings.IndexByte(s, '(')
		if end < 0 || open < 1 {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
		f := strings.Fields(s[end+1:])
		if err != nil || len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
		var t int64
		for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
			n, _ := strconv.ParseInt(f[i], 10, 64)
			t += n
		}
		ticks[pid] = t
	}
	var sum int64
	var walk func(int)
	walk = func(pid int) {
		sum += ticks[pid]
		for _, c := range children[pid] {
			walk(c)
		}
	}
	walk(root)
	return time.Duration(sum) * clockTick
}

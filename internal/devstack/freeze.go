package devstack

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A frozen store is the fault a network partition or a stalled disk looks like from
// Loom: the server's processes are stopped (SIGSTOP), so their sockets stay open, the
// kernel still completes new connections and takes what is sent, and nothing answers,
// until they are thawed (SIGCONT). Loom must answer its retryable 503 within each
// request's budget meanwhile, rather than hang for as long as the freeze.

// Freeze stops every process of the cluster: the postmaster, so it forks no more, and
// its children (backends, walsenders, background workers), which each lead a process
// group of their own. It returns once all of them are stopped.
func (p *Postgres) Freeze() error { return freeze("Postgres", p.pid) }

// Thaw resumes a frozen cluster.
func (p *Postgres) Thaw() error { return thaw("Postgres", p.pid) }

// Freeze stops the server, every thread of it, and returns once it is stopped.
func (c *ClickHouse) Freeze() error { return freeze("ClickHouse", c.pid()) }

// Thaw resumes a frozen server.
func (c *ClickHouse) Thaw() error { return thaw("ClickHouse", c.pid()) }

func (c *ClickHouse) pid() int {
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// freeze stops the process group led by pid and the children of pid, then waits until
// every thread of them is stopped: a signal is delivered, not obeyed, when kill returns.
func freeze(what string, pid int) error {
	if pid <= 0 {
		return errors.New(what + " is not running")
	}
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("stop %s (process group %d): %w", what, pid, err)
	}
	procs := append([]int{pid}, children(pid)...)
	for _, child := range procs[1:] {
		if err := syscall.Kill(child, syscall.SIGSTOP); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("stop a process of %s (%d): %w", what, child, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for !allStopped(procs) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not stop within 5s of SIGSTOP", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// thaw resumes the children of pid, then its process group.
func thaw(what string, pid int) error {
	if pid <= 0 {
		return errors.New(what + " is not running")
	}
	for _, child := range children(pid) {
		if err := syscall.Kill(child, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("resume a process of %s (%d): %w", what, child, err)
		}
	}
	if err := syscall.Kill(-pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("resume %s (process group %d): %w", what, pid, err)
	}
	return nil
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := statFields(filepath.Join("/proc", e.Name(), "stat")); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// allStopped reports whether every thread of procs is stopped (or gone).
func allStopped(procs []int) bool {
	for _, pid := range procs {
		tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "stat"))
		for _, task := range tasks {
			if f := statFields(task); len(f) > 0 && f[0] != "T" && f[0] != "t" && f[0] != "Z" && f[0] != "X" {
				return false
			}
		}
	}
	return true
}

// statFields are the fields of a /proc stat file after "pid (comm)": state, ppid, …
// comm may hold spaces and parentheses, so they are read after the last ')'.
func statFields(file string) []string {
	stat, err := os.ReadFile(file)
	if err != nil {
		return nil // gone meanwhile
	}
	return strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
}

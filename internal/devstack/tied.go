package devstack

import (
	"os/exec"
	"runtime"
	"syscall"
)

// startTied starts cmd as a child that the kernel sends sig when this process dies,
// however it dies (kill -9 included), so a server never outlives the `loomd dev` or
// the test that started it. onExit runs once the child has exited and been reaped;
// the returned channel is closed after it.
//
// Linux sends the parent-death signal when the thread that forked the child exits,
// not the process: the child is started from a goroutine locked to its OS thread,
// which stays blocked in Wait, so the thread lives exactly as long as the child. The
// signal must go to the server itself (a wrapper such as pg_ctl would take it and
// leave the server running), and Go sets it after switching to cmd's credentials,
// which would otherwise clear it.
func startTied(cmd *exec.Cmd, sig syscall.Signal, onExit func()) (<-chan struct{}, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = sig
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine, after the child
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		if onExit != nil {
			onExit()
		}
		close(exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}

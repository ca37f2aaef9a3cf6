package devstack

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FreePort returns a loopback port that nothing listens on, for a server that is
// about to bind it. Between this check and the bind another process may take the
// port; to make that unlikely the port is drawn at random from below the kernel's
// ephemeral range, which the kernel never hands to an outgoing connection (a test
// suite opens thousands of those while its servers start).
func FreePort() (int, error) {
	lo, hi := listenRange()
	for i := 0; i < 64 && hi-lo >= 1000; i++ {
		p := lo + rand.IntN(hi-lo)
		if portFree(p) {
			return p, nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// listenRange is where FreePort draws from: the ports between 10000 and the start
// of the ephemeral range (32768 on Linux unless an operator moved it). A range of
// fewer than 1000 leaves the choice to the kernel.
func listenRange() (lo, hi int) {
	lo, hi = 10000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				hi = n
			}
		}
	}
	return lo, hi
}

func portFree(port int) bool {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// stickyPorts returns n ports for a store, reusing the ones recorded in file by the
// previous start while they are free, so a developer's psql or clickhouse-client
// command keeps working across `loomd dev` runs.
func stickyPorts(file string, n int) ([]int, error) {
	var ports []int
	if b, err := os.ReadFile(file); err == nil {
		for _, f := range strings.Fields(string(b)) {
			p, err := strconv.Atoi(f)
			if err != nil || !portFree(p) {
				ports = nil
				break
			}
			ports = append(ports, p)
		}
	}
	if len(ports) != n {
		ports = ports[:0]
		seen := map[int]bool{}
		for len(ports) < n {
			p, err := FreePort()
			if err != nil {
				return nil, err
			}
			if !seen[p] {
				seen[p] = true
				ports = append(ports, p)
			}
		}
	}
	var parts []string
	for _, p := range ports {
		parts = append(parts, strconv.Itoa(p))
	}
	if err := os.WriteFile(file, []byte(strings.Join(parts, " ")+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("record ports in %s: %w", filepath.Base(file), err)
	}
	return ports, nil
}

package devstack

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// freePort asks the kernel for an unused loopback port. Another process may take
// it before the server binds it; the servers then fail to start and say so.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
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
			p, err := freePort()
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

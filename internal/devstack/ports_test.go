package devstack

import (
	"fmt"
	"net"
	"testing"
)

// A port for a server comes from below the ephemeral range, where no outgoing
// connection of a busy test suite can take it before the server binds, and it binds.
func TestFreePortIsOutsideTheEphemeralRange(t *testing.T) {
	lo, hi := listenRange()
	chosen := hi-lo >= 1000 // else the kernel chooses
	for range 20 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if chosen && (p < lo || p >= hi) {
			t.Fatalf("FreePort gave %d, outside [%d, %d)", p, lo, hi)
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("bind the port FreePort gave: %v", err)
		}
		ln.Close()
	}
}

package app

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/loomplane/loom/internal/config"
)

// A stop drains the request in flight and does not wait for a connection that never
// sent one (a client's spare connection): on main such a connection held the stop until
// the end of the grace, which answered "requests still in flight".
func TestShutdownDrainsRequestsAndClosesUnusedConnections(t *testing.T) {
	srv := fiber.New(fiber.Config{DisableStartupMessage: true, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute})
	entered, release := make(chan struct{}), make(chan struct{})
	srv.Get("/slow", func(c *fiber.Ctx) error {
		close(entered)
		<-release
		return c.SendString("drained")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := newUnusedConns(ln)
	go srv.Listener(conns)
	url := "http://" + ln.Addr().String()

	spare, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer spare.Close()
	answer := make(chan string, 1)
	go func() {
		resp, err := http.Get(url + "/slow")
		if err != nil {
			answer <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answer <- string(b)
	}()
	<-entered

	p := &Process{HTTP: srv, Cfg: config.Config{Pipeline: config.Pipeline{ShutdownGrace: 3 * time.Second}}}
	stopped := make(chan error, 1)
	go func() { stopped <- p.shutdownHTTP(conns) }()
	time.Sleep(200 * time.Millisecond) // the shutdown is under way with the request in flight
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("the shutdown did not end within its grace: %v", err)
	}
	if got := <-answer; got != "drained" {
		t.Fatalf("the request in flight answered %q, want it drained", got)
	}
	spare.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := spare.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the unused connection was not closed: %v", err)
	}
}

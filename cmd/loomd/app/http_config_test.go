package app

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/loomplane/loom/internal/config"
)

// A namespace a handler keeps past its request (a cache's key, a write queued for
// later) still reads as the request named it after the next requests on the same
// connection: with fiber's default configuration the route parameter is a view of the
// request's buffer, and the next request's path overwrote it.
func TestARouteParameterKeptPastItsRequestKeepsItsValue(t *testing.T) {
	srv := fiber.New(httpConfig(config.HTTP{BodyLimitBytes: 1 << 20}, slog.New(slog.DiscardHandler)))
	var kept []string
	srv.Get("/v1/namespaces/:ns", func(c *fiber.Ctx) error {
		kept = append(kept, c.Params("ns"))
		return c.SendString("ok")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Listener(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}} // one connection, reused
	names := []string{"notes-aa", "notes-bb", "notes-cc"}
	for _, ns := range names {
		resp, err := client.Get("http://" + ln.Addr().String() + "/v1/namespaces/" + ns)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if got := strings.Join(kept, ","); got != strings.Join(names, ",") {
		t.Fatalf("the namespaces kept past their requests read %s, want %s", got, strings.Join(names, ","))
	}
}

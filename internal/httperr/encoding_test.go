package httperr

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/gofiber/fiber/v2"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
)

// Each coding fiber decoded is decoded once, in the order the header lists them
// undone last first, and held to the limit once decoded; the handler reads a plain
// body with no Content-Encoding left.
func TestDecodeContent(t *testing.T) {
	const limit = 1 << 10
	app := fiber.New(fiber.Config{ErrorHandler: Handler(slog.New(slog.DiscardHandler))})
	app.Use(DecodeContent(limit))
	app.Post("/", func(c *fiber.Ctx) error {
		return c.SendString(c.Get(fiber.HeaderContentEncoding) + "|" + string(c.Body()))
	})
	gz := func(b []byte) []byte {
		var out bytes.Buffer
		w := gzip.NewWriter(&out)
		w.Write(b)
		w.Close()
		return out.Bytes()
	}
	zl := func(b []byte) []byte {
		var out bytes.Buffer
		w := zlib.NewWriter(&out)
		w.Write(b)
		w.Close()
		return out.Bytes()
	}
	br := func(b []byte) []byte {
		var out bytes.Buffer
		w := brotli.NewWriter(&out)
		w.Write(b)
		w.Close()
		return out.Bytes()
	}
	plain := []byte(`{"value": "x"}`)
	for _, c := range []struct {
		name, encoding string
		body           []byte
		status         int
		want           string
	}{
		{"none", "", plain, http.StatusOK, "|" + string(plain)},
		{"gzip", "gzip", gz(plain), http.StatusOK, "|" + string(plain)},
		{"x-gzip", "X-Gzip", gz(plain), http.StatusOK, "|" + string(plain)},
		{"deflate", "deflate", zl(plain), http.StatusOK, "|" + string(plain)},
		{"br", "br", br(plain), http.StatusOK, "|" + string(plain)},
		{"gzip then br", "gzip, br", br(gz(plain)), http.StatusOK, "|" + string(plain)},
		{"exactly the limit", "gzip", gz(bytes.Repeat([]byte("a"), limit)), http.StatusOK, "|" + string(bytes.Repeat([]byte("a"), limit))},
		{"one past the limit", "gzip", gz(bytes.Repeat([]byte("a"), limit+1)), http.StatusRequestEntityTooLarge, ""},
		{"a bomb", "gzip", gz(make([]byte, 64<<20)), http.StatusRequestEntityTooLarge, ""},
		{"not gzip", "gzip", plain, http.StatusUnprocessableEntity, ""},
		{"an unknown coding", "zstd", plain, http.StatusUnprocessableEntity, ""},
	} {
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(c.body))
		if c.encoding != "" {
			req.Header.Set("Content-Encoding", c.encoding)
		}
		resp, err := app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.status || c.want != "" && string(got) != c.want {
			t.Errorf("%s: %d %q, want %d %q", c.name, resp.StatusCode, got, c.status, c.want)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(br(gz(plain))))
	req.Header.Add("Content-Encoding", "gzip")
	req.Header.Add("Content-Encoding", "br")
	resp, err := app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || string(got) != "|"+string(plain) {
		t.Errorf("two Content-Encoding headers, gzip then br: %d %q", resp.StatusCode, got)
	}
}

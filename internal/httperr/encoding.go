package httperr

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/gofiber/fiber/v2"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
)

// DecodeContent undoes a request body's Content-Encoding before any route reads it,
// streaming the decompression through limit: a body that inflates past limit is
// refused with 413 PAYLOAD_TOO_LARGE as a plain one past it is, having held at most
// limit+1 bytes of it. The server's body limit counts the bytes on the wire only, and
// fiber's Ctx.Body would inflate the whole body, however large, on every read. The
// decoded body replaces the raw one and the header is removed, so every reader (the
// REST handlers, a restore, the adapters mounted as net/http handlers) sees one plain
// body, decoded once. Repeated Content-Encoding headers are one list, as RFC 9110
// reads them. gzip, deflate (zlib) and br are the codings fiber decoded;
// another is refused rather than passed on as if it were plain.
func DecodeContent(limit int) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var codings []string
		for _, v := range c.Request().Header.PeekAll(fiber.HeaderContentEncoding) {
			codings = append(codings, strings.Split(string(v), ",")...)
		}
		if len(codings) == 0 {
			return c.Next()
		}
		body := c.Request().Body()
		// The codings are listed in the order they were applied: undo the last first.
		for i := len(codings) - 1; i >= 0; i-- {
			coding := strings.ToLower(strings.TrimSpace(codings[i]))
			if coding == "identity" || coding == "" {
				continue
			}
			decoded, err := decode(coding, body, limit)
			if err != nil {
				return err
			}
			body = decoded
		}
		c.Request().SetBodyRaw(body)
		c.Request().Header.Del(fiber.HeaderContentEncoding)
		return c.Next()
	}
}

func decode(coding string, body []byte, limit int) ([]byte, error) {
	var (
		r   io.Reader
		err error
	)
	switch coding {
	case "gzip", "x-gzip":
		r, err = gzip.NewReader(bytes.NewReader(body))
	case "deflate":
		r, err = zlib.NewReader(bytes.NewReader(body))
	case "br":
		r = brotli.NewReader(bytes.NewReader(body))
	default:
		return nil, Validation("Content-Encoding", fmt.Sprintf("Content-Encoding %q is not served: send the body plain, or gzip, deflate or br", coding))
	}
	if err != nil {
		return nil, Validation("body", fmt.Sprintf("the body is not %s: %v", coding, err))
	}
	var out bytes.Buffer
	n, err := out.ReadFrom(io.LimitReader(r, int64(limit)+1))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, Validation("body", fmt.Sprintf("the body is not %s: %v", coding, err))
	}
	if n > int64(limit) {
		return nil, New(http.StatusRequestEntityTooLarge, CodePayloadTooLarge,
			fmt.Sprintf("the request body is larger than %d bytes once decompressed (LOOM_HTTP_BODY_LIMIT_BYTES)", limit))
	}
	return out.Bytes(), nil
}

package command

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/route"
)

// decode reads a JSON object body strictly. Unlike memory's bodies, a document's text
// may hold any character (a NUL included): it is sealed in bytea, never in a text
// column, so only a source URI is refused what Postgres cannot key.
func decode(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return httperr.Validation("body", "the body must be a JSON object of the operation's fields: "+err.Error())
	}
	if dec.More() {
		return httperr.Validation("body", "unexpected data after the JSON object")
	}
	return nil
}

func (s *Service) handleAdd(c *fiber.Ctx) error    { return s.handleWrite(c, false) }
func (s *Service) handleUpsert(c *fiber.Ctx) error { return s.handleWrite(c, true) }

func (s *Service) handleWrite(c *fiber.Ctx, upsert bool) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	var in DocumentInput
	if err := decode(c.Body(), &in); err != nil {
		return err
	}
	w, err := s.add(c.UserContext(), p, ns, &in, upsert)
	if err != nil {
		return err
	}
	return c.JSON(w)
}

func (s *Service) handleBulkAdd(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	var req BulkAddRequest
	if err := decode(c.Body(), &req); err != nil {
		return err
	}
	ans, err := s.bulkAdd(c.UserContext(), p, ns, &req)
	if err != nil {
		return err
	}
	return c.JSON(ans)
}

func (s *Service) handleDelete(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	req := HeadRequest{SourceURI: c.Query("source_uri")}
	if v := c.Query("expected_version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return httperr.Validation("expected_version", "expected_version is the decimal version read")
		}
		req.ExpectedVersion = &n
	}
	w, err := s.delete(c.UserContext(), p, ns, req)
	if err != nil {
		return err
	}
	return c.JSON(w)
}

func (s *Service) handleRestore(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	var req HeadRequest
	if err := decode(c.Body(), &req); err != nil {
		return err
	}
	w, err := s.restore(c.UserContext(), p, ns, req)
	if err != nil {
		return err
	}
	return c.JSON(w)
}

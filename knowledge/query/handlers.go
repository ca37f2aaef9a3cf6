package query

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/route"
	"github.com/loomplane/loom/knowledge/store"
)

func (s *Service) handleGet(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	d, err := s.get(c.UserContext(), p, ns, c.Query("source_uri"), c.QueryBool("include_deleted"))
	if err != nil {
		return err
	}
	return c.JSON(d)
}

func (s *Service) handleList(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	o := store.ListOptions{Prefix: c.Query("prefix"), After: c.Query("after"), IncludeDeleted: c.QueryBool("include_deleted")}
	if v := c.Query("limit"); v != "" {
		if o.Limit, err = strconv.Atoi(v); err != nil || o.Limit < 1 {
			return httperr.Validation("limit", "limit is a positive integer")
		}
	}
	ans, err := s.list(c.UserContext(), p, ns, c.Query("user_id"), o)
	if err != nil {
		return err
	}
	return c.JSON(ans)
}

func (s *Service) handleOutline(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	o, err := s.outline(c.UserContext(), p, ns, c.Query("source_uri"))
	if err != nil {
		return err
	}
	return c.JSON(o)
}

func (s *Service) handleSearch(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	var req SearchRequest
	dec := json.NewDecoder(bytes.NewReader(c.Body()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return httperr.Validation("body", "the body must be a JSON object of knowledge.search's fields: "+err.Error())
	}
	ans, err := s.search(c.UserContext(), p, ns, &req)
	if err != nil {
		return err
	}
	return c.JSON(ans)
}

func (s *Service) handleIngestStatus(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	st, err := s.ingestStatus(c.UserContext(), p, ns, c.Params("ingestion_id"))
	if err != nil {
		return err
	}
	return c.JSON(st)
}

func (s *Service) handleSynthesize(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	var req SynthesizeRequest
	dec := json.NewDecoder(bytes.NewReader(c.Body()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return httperr.Validation("body", "the body must be a JSON object of knowledge.synthesize's fields: "+err.Error())
	}
	ans, err := s.synthesize(c.UserContext(), p, ns, &req)
	if err != nil {
		return err
	}
	return c.JSON(ans)
}

func (s *Service) handleInspect(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	in, err := s.inspect(c.UserContext(), p, ns)
	if err != nil {
		return err
	}
	return c.JSON(in)
}

func (s *Service) handleDatasetGet(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	d, err := s.datasetGet(c.UserContext(), p, ns, c.Query("source_uri"))
	if err != nil {
		return err
	}
	return c.JSON(d)
}

func (s *Service) handleQuery(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	var req QueryRequest
	dec := json.NewDecoder(bytes.NewReader(c.Body()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return httperr.Validation("body", "the body must be a JSON object of knowledge.query's fields: "+err.Error())
	}
	ans, err := s.query(c.UserContext(), p, ns, &req)
	if err != nil {
		return err
	}
	return c.JSON(ans)
}

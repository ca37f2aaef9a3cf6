package command

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"sort"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/idempotency"
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
	run := func(ctx context.Context, hold *idempotency.Hold) (any, error) {
		return s.add(ctx, p, ns, &in, upsert, hold)
	}
	if upsert {
		return s.idempotent(c, p, "knowledge.upsert", run)
	}
	return s.idempotent(c, p, "knowledge.add", run)
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
	return s.idempotent(c, p, "knowledge.bulk_add", func(ctx context.Context, hold *idempotency.Hold) (any, error) {
		return s.bulkAdd(ctx, p, ns, &req, hold)
	})
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
	return s.idempotent(c, p, "knowledge.delete", func(ctx context.Context, hold *idempotency.Hold) (any, error) {
		return s.delete(ctx, p, ns, req, hold)
	})
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
	return s.idempotent(c, p, "knowledge.restore", func(ctx context.Context, hold *idempotency.Hold) (any, error) {
		return s.restore(ctx, p, ns, req, hold)
	})
}

// handleIngest is knowledge.ingest: the documents as JSON ({"documents": [...]}), as
// a multipart/form-data upload (every file part a document named by its file name)
// or as a tar archive (application/x-tar: every regular file a document named by its
// path), the last two under the source_prefix and tags of the query or the form.
func (s *Service) handleIngest(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	var req IngestRequest
	prefix, tags := c.Query("source_prefix"), splitTags(c.Query("tags"))
	req.UserID = c.Query("user_id")
	mediaType, _, _ := mime.ParseMediaType(c.Get(fiber.HeaderContentType))
	switch mediaType {
	case fiber.MIMEMultipartForm:
		form, err := c.MultipartForm()
		if err != nil {
			return httperr.Validation("body", "the multipart body does not parse: "+err.Error())
		}
		if v := form.Value["source_prefix"]; len(v) > 0 {
			prefix = v[0]
		}
		if v := form.Value["tags"]; len(v) > 0 {
			tags = splitTags(strings.Join(v, ","))
		}
		if v := form.Value["user_id"]; len(v) > 0 {
			req.UserID = v[0]
		}
		if req.Documents, err = documentsFromForm(form, prefix, tags); err != nil {
			return err
		}
	case "application/x-tar", "application/tar":
		if req.Documents, err = documentsFromTar(bytes.NewReader(c.Body()), prefix, tags); err != nil {
			return err
		}
	default:
		if err := decode(c.Body(), &req); err != nil {
			return err
		}
	}
	return s.idempotent(c, p, "knowledge.ingest", func(ctx context.Context, hold *idempotency.Hold) (any, error) {
		return s.ingest(ctx, p, ns, &req, hold)
	})
}

func (s *Service) handleIngestCancel(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	id := c.Params("ingestion_id")
	return s.idempotent(c, p, "knowledge.ingest_cancel", func(ctx context.Context, hold *idempotency.Hold) (any, error) {
		return s.ingestCancel(ctx, p, ns, id, hold)
	})
}

// documentsFromForm reads a multipart form's file parts, in field order then part
// order, each a document named prefix + its file name.
func documentsFromForm(form *multipart.Form, prefix string, tags []string) ([]DocumentInput, error) {
	fields := make([]string, 0, len(form.File))
	for f := range form.File {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	var out []DocumentInput
	for _, f := range fields {
		for _, fh := range form.File[f] {
			file, err := fh.Open()
			if err != nil {
				return nil, httperr.Validation("body", "a file part does not open: "+err.Error())
			}
			body, err := io.ReadAll(io.LimitReader(file, MaxDocumentBytes+1))
			file.Close()
			if err != nil {
				return nil, httperr.Validation("body", "a file part does not read: "+err.Error())
			}
			ct, _, _ := mime.ParseMediaType(fh.Header.Get(fiber.HeaderContentType))
			if ct == "application/octet-stream" {
				ct = ""
			}
			out = append(out, bodyInput(prefix+fh.Filename, fh.Filename, ct, tags, body))
		}
	}
	if len(out) == 0 {
		return nil, httperr.Validation("body", "the multipart body holds no file part")
	}
	return out, nil
}

func splitTags(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

func (s *Service) handleApproveDataset(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	var req ApproveRequest
	if err := decode(c.Body(), &req); err != nil {
		return err
	}
	a, err := s.approveDataset(c.UserContext(), p, ns, &req)
	if err != nil {
		return err
	}
	return c.JSON(a)
}

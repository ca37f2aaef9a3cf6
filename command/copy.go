package command

import (
	"errors"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// A copy writer changes a key's state, not its value: it builds a new version from
// the head it read and commits only over that exact version. A head that moved in
// between answers 503 ADMISSION_CONTENDED, retryable, and writes nothing.

// copyChange changes a copy of the head; it may refuse.
type copyChange func(row *memrow.Row) error

// keyMethods are the custom methods of POST /v1/namespaces/{ns}/memories/{key}:{method}.
var keyMethods = map[string]struct {
	op     string
	change copyChange
}{
	"pin":    {"memory.pin", func(r *memrow.Row) error { r.Pinned = true; return nil }},
	"unpin":  {"memory.unpin", func(r *memrow.Row) error { r.Pinned = false; return nil }},
	"lock":   {"memory.lock", func(r *memrow.Row) error { r.Locked = true; return nil }},
	"unlock": {"memory.unlock", func(r *memrow.Row) error { r.Locked = false; return nil }},
}

// splitMethod splits a raw path segment "key:method" at its last colon; a colon that
// belongs to the key is sent percent-encoded.
func splitMethod(raw string) (key, method string, err error) {
	i := strings.LastIndexByte(raw, ':')
	if i < 0 {
		return "", "", httperr.NotFound("no such route: POST a custom method, e.g. .../memories/{key}:pin")
	}
	key, err = url.PathUnescape(raw[:i])
	if err != nil {
		return "", "", httperr.Validation("memory_key", "the key is not valid percent-encoding")
	}
	return key, raw[i+1:], nil
}

// copyBody is the optional body of a copy writer: the identity of the key.
type copyBody struct {
	Agent     string `json:"agent"`
	UserID    string `json:"user_id"`
	SessionID string `json:"session_id"`
}

type copyAnswer struct {
	MemoryID    string `json:"memory_id"`
	MemoryKey   string `json:"memory_key"`
	Version     int64  `json:"version"`
	VersionText string `json:"version_text"`
	Seq         int64  `json:"seq"`
	Event       string `json:"event"`
	Status      string `json:"status"`
	Pinned      bool   `json:"pinned"`
	Locked      bool   `json:"locked"`
}

func (s *Service) handleKeyMethod(c *fiber.Ctx) error {
	key, method, err := splitMethod(c.Params("key"))
	if err != nil {
		return err
	}
	m, ok := keyMethods[method]
	if !ok {
		return httperr.NotFound("unknown method :" + method)
	}
	start := s.now()
	ans, err := s.copyWrite(c, key, m.op, m.change)
	outcome := "ok"
	if err != nil {
		outcome = outcomeOf(err)
	}
	s.writes.With(m.op, outcome).Inc()
	s.latency.With(m.op).ObserveSince(start)
	if err != nil {
		return err
	}
	return c.JSON(ans)
}

func (s *Service) copyWrite(c *fiber.Ctx, key, op string, change copyChange) (*copyAnswer, error) {
	p := auth.From(c)
	ns := c.Params("ns")
	if err := p.Namespace(ns); err != nil {
		return nil, err
	}
	if err := p.RequireWrite(); err != nil {
		return nil, err
	}
	var body copyBody
	if len(c.Body()) > 0 {
		if err := httperr.DecodeBody(c.Body(), &body); err != nil {
			return nil, err
		}
	}
	id := memrow.Identity{Org: p.Org, Namespace: ns, Agent: orDash(body.Agent), UserID: orDash(body.UserID),
		SessionID: orDash(body.SessionID), MemoryKey: key}
	if p.ReadUserID != "" && body.UserID == "" {
		id.UserID = p.ReadUserID
	}
	if err := validateIdentity(id); err != nil {
		return nil, err
	}
	ctx := c.UserContext()
	head, err := heads.Read(ctx, s.pool, id)
	if err != nil {
		return nil, httperr.Store("reading the head", err)
	}
	if head == nil || !head.Live(s.now()) || (p.ReadUserID != "" && head.UserID != p.ReadUserID) {
		return nil, httperr.NotFound("memory not found")
	}
	row := copyOf(head)
	row.Actor = p.Actor()
	if err := change(row); err != nil {
		return nil, err
	}
	plan := &commitPlan{org: p.Org, namespace: ns, requestID: c.Get("X-Request-Id"), policyGeneration: -1,
		rows: []*pending{{op: op, event: events.TypeStatusChanged, row: row, readVersion: head.Version}}}
	if err := s.commit(ctx, plan); err != nil {
		if errors.Is(err, errHeadMoved) {
			return nil, contended(err)
		}
		return nil, commitError(err)
	}
	return &copyAnswer{MemoryID: row.MemoryID, MemoryKey: row.MemoryKey, Version: row.Version,
		VersionText: memrow.VersionText(row.Version), Seq: row.Seq, Event: string(events.TypeStatusChanged),
		Status: row.Status, Pinned: row.Pinned, Locked: row.Locked}, nil
}

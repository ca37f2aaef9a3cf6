package command

import (
	"encoding/json"
	"errors"
	"net/url"

	"github.com/gofiber/fiber/v2"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

// setRequest is the body of PUT /v1/namespaces/{ns}/memories/{key} (memory.set).
// Absent optional fields carry the head's values forward on a revision.
type setRequest struct {
	Value      json.RawMessage `json:"value"`
	Agent      string          `json:"agent"`
	UserID     string          `json:"user_id"`
	SessionID  string          `json:"session_id"`
	MemoryType string          `json:"memory_type"`
	Tags       []string        `json:"tags"`
	Confidence *float64        `json:"confidence"`
}

// setAnswer is what memory.set answers.
type setAnswer struct {
	MemoryID           string `json:"memory_id"`
	Namespace          string `json:"namespace"`
	MemoryKey          string `json:"memory_key"`
	Agent              string `json:"agent"`
	UserID             string `json:"user_id"`
	SessionID          string `json:"session_id"`
	Version            int64  `json:"version"`
	VersionText        string `json:"version_text"`
	Seq                int64  `json:"seq"`
	ContentSHA256      string `json:"content_sha256"`
	ReinforcementCount int    `json:"reinforcement_count"`
	Event              string `json:"event"`
}

func (s *Service) handleSet(c *fiber.Ctx) error {
	start := s.now()
	ans, err := s.set(c)
	outcome := "ok"
	if err != nil {
		outcome = outcomeOf(err)
	}
	s.writes.With("memory.set", outcome).Inc()
	s.latency.With("memory.set").ObserveSince(start)
	if err != nil {
		return err
	}
	return c.JSON(ans)
}

func (s *Service) set(c *fiber.Ctx) (*setAnswer, error) {
	p := auth.From(c)
	ns := c.Params("ns")
	if err := p.Namespace(ns); err != nil {
		return nil, err
	}
	if err := p.RequireWrite(); err != nil {
		return nil, err
	}
	key, err := url.PathUnescape(c.Params("key"))
	if err != nil {
		return nil, httperr.Validation("memory_key", "the key is not valid percent-encoding")
	}
	req, err := decodeSet(c.Body())
	if err != nil {
		return nil, err
	}
	id := memrow.Identity{Org: p.Org, Namespace: ns, Agent: orDash(req.Agent), UserID: orDash(req.UserID),
		SessionID: orDash(req.SessionID), MemoryKey: key}
	if err := validateIdentity(id); err != nil {
		return nil, err
	}
	value, err := memrow.Canonical("value", req.Value)
	if err != nil {
		return nil, err
	}
	if err := memrow.CheckCharLimit(value, s.cfg.CharLimit); err != nil {
		return nil, err
	}
	if req.Tags != nil {
		if err := memrow.ValidateTags(req.Tags); err != nil {
			return nil, err
		}
	}
	if req.Confidence != nil {
		if err := memrow.ValidateConfidence(*req.Confidence); err != nil {
			return nil, err
		}
	}
	if req.MemoryType != "" {
		if err := memrow.ValidateName("memory_type", req.MemoryType); err != nil {
			return nil, err
		}
	}
	// The embed is slow work: it runs once, outside any transaction, and a head
	// that moves under a round changes only how the row is built, not its text.
	vectors, err := s.embedder.Embed(c.UserContext(), []string{memrow.EmbedText(key, value)})
	if err != nil {
		if errors.Is(err, embed.ErrEmbedderUnavailable) {
			return nil, httperr.Unavailable(httperr.CodeEmbedderDown, "the embedder is unavailable; retry", err)
		}
		return nil, httperr.Store("embedding the value", err)
	}
	rev := &revision{
		op:     "memory.set",
		id:     id,
		actor:  p.Actor(),
		value:  value,
		sha:    memrow.ContentSHA256(value),
		vector: vectors[0],
	}
	return s.admit(c, rev, func(head *memrow.Row) *memrow.Row { return buildSetRow(rev, req, head, s.embedder) })
}

// buildSetRow builds the version row over the head read in this round: a restatement
// of the live value reinforces it; any other value resets what described the old one.
func buildSetRow(rev *revision, req *setRequest, head *memrow.Row, e embed.Embedder) *memrow.Row {
	row := &memrow.Row{
		Identity:       rev.id,
		MemoryType:     memrow.DefaultMemoryType,
		Status:         memrow.StatusActive,
		Value:          rev.value,
		ContentSHA256:  rev.sha,
		Tags:           []string{},
		Entities:       []string{},
		Confidence:     1,
		Actor:          rev.actor,
		SourceClass:    "direct",
		EmbeddingModel: e.Model(),
		EmbeddingDim:   len(rev.vector),
	}
	if head != nil {
		row.MemoryID = head.MemoryID
		row.CreatedAt = head.CreatedAt
		if head.Live() {
			row.MemoryType, row.Tags, row.Confidence = head.MemoryType, head.Tags, head.Confidence
			if head.ContentSHA256 == rev.sha {
				row.ReinforcementCount = head.ReinforcementCount + 1
			}
		}
	}
	if req.MemoryType != "" {
		row.MemoryType = req.MemoryType
	}
	if req.Tags != nil {
		row.Tags = req.Tags
	}
	if req.Confidence != nil {
		row.Confidence = *req.Confidence
	}
	return row
}

func decodeSet(body []byte) (*setRequest, error) {
	var req setRequest
	if err := httperr.DecodeBody(body, &req); err != nil {
		return nil, err
	}
	if len(req.Value) == 0 {
		return nil, httperr.Validation("value", "value is required (any JSON value)")
	}
	return &req, nil
}

func validateIdentity(id memrow.Identity) error {
	if err := memrow.ValidateKey(id.MemoryKey); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"agent", id.Agent}, {"user_id", id.UserID}, {"session_id", id.SessionID}} {
		if err := memrow.ValidateIdentity(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return memrow.DefaultIdentity
	}
	return s
}

func answer(row *memrow.Row, event events.Type) *setAnswer {
	return &setAnswer{
		MemoryID: row.MemoryID, Namespace: row.Namespace, MemoryKey: row.MemoryKey,
		Agent: row.Agent, UserID: row.UserID, SessionID: row.SessionID,
		Version: row.Version, VersionText: memrow.VersionText(row.Version), Seq: row.Seq,
		ContentSHA256: row.ContentSHA256, ReinforcementCount: row.ReinforcementCount, Event: string(event),
	}
}

func outcomeOf(err error) string {
	var he *httperr.Error
	if errors.As(err, &he) {
		if he.Status >= 500 {
			return "error"
		}
		return "refused"
	}
	var fe *memrow.FieldError
	if errors.As(err, &fe) {
		return "refused"
	}
	return "error"
}

package mem0

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/loomplane/loom/client"
)

// get is memory.get_by_id.
func (f *facade) get(ctx context.Context, c *call) (any, error) {
	m, err := c.loom.GetByID(ctx, c.r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return f.record(m), nil
}

// updateRequest is the body of PUT /v1/memories/{id}/ as MemoryClient.update sends it.
type updateRequest struct {
	Text           *string         `json:"text"`
	Metadata       map[string]any  `json:"metadata"`
	Timestamp      json.Number     `json:"timestamp"`
	ExpirationDate json.RawMessage `json:"expiration_date"`
}

// updateAnswer is mem0's update answer: the memory as it now stands.
type updateAnswer struct {
	Text string `json:"text"`
	record
	Event   string `json:"event"`
	Verdict string `json:"verdict"`
}

// update is memory.update_by_id with the new text and metadata folded into the
// stored value, guarded by the content read (if_match_sha256): a write that lands in
// between is read again rather than overwritten.
func (f *facade) update(ctx context.Context, c *call) (any, error) {
	var req updateRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.Text == nil && req.Metadata == nil && req.Timestamp == "" && len(req.ExpirationDate) == 0 {
		return nil, badRequest("give at least one of text, metadata, timestamp, expiration_date")
	}
	u := client.UpdateRequest{}
	if req.Timestamp != "" {
		t, err := unixOrRFC3339(req.Timestamp)
		if err != nil {
			return nil, err
		}
		u.ValidAt = t
	}
	var exp string
	if len(req.ExpirationDate) > 0 && string(req.ExpirationDate) != "null" {
		if json.Unmarshal(req.ExpirationDate, &exp) != nil {
			return nil, badRequest("expiration_date: want a date")
		}
		t, err := expiration(exp)
		if err != nil {
			return nil, err
		}
		u.ValidTo = t
	}
	id := c.r.PathValue("id")
	a, m, err := f.updateText(ctx, c, id, req.Text, req.Metadata, u)
	if err != nil {
		return nil, inMem0Words(err, updateFields(""))
	}
	r := f.record(m)
	return updateAnswer{Text: r.Memory, record: r, Event: a.Event, Verdict: a.Verdict}, nil
}

// updateText rewrites the text and metadata of memory id (nil keeps them), read and
// written under if_match_sha256, up to three rounds. It answers the write and the
// memory as it now stands.
func (f *facade) updateText(ctx context.Context, c *call, id string, text *string, metadata map[string]any, u client.UpdateRequest) (*client.SetAnswer, *client.Memory, error) {
	for round := 0; ; round++ {
		m, err := c.loom.GetByID(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		s := readStored(m.Value)
		if text != nil {
			s.Memory = *text
		}
		if metadata != nil {
			s.Metadata = metadata
		}
		u.Value, u.IfMatchSHA256 = s, m.ContentSHA256
		a, err := c.loom.UpdateByID(ctx, id, u)
		if client.IsCode(err, client.CodePreconditionFailed) && round < 2 {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if m, err = c.loom.GetByID(ctx, id); err != nil {
			return nil, nil, err
		}
		return a, m, nil
	}
}

func unixOrRFC3339(n json.Number) (time.Time, error) {
	if secs, err := strconv.ParseFloat(string(n), 64); err == nil {
		return time.Unix(0, int64(secs*1e9)).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, string(n)); err == nil {
		return t, nil
	}
	return time.Time{}, badRequest("timestamp: want Unix seconds or an RFC 3339 time")
}

// delete tombstones the key that holds memory id (memory.delete); :restore brings it back.
func (f *facade) delete(ctx context.Context, c *call) (any, error) {
	if err := f.deleteID(ctx, c, c.r.PathValue("id")); err != nil {
		return nil, err
	}
	return map[string]string{"message": "Memory deleted successfully!"}, nil
}

func (f *facade) deleteID(ctx context.Context, c *call, id string) error {
	m, err := c.loom.GetByID(ctx, id)
	if err != nil {
		return err
	}
	_, err = c.loom.Delete(ctx, m.Namespace, m.MemoryKey, client.Identity{Agent: m.Agent, UserID: m.UserID, SessionID: m.SessionID}, "")
	return err
}

// deleteAll is memory.clear of the entities the query names (at least one): app_id is
// the namespace, the others narrow it.
func (f *facade) deleteAll(ctx context.Context, c *call) (any, error) {
	q := c.r.URL.Query()
	e := entities{UserID: q.Get("user_id"), AgentID: q.Get("agent_id"), AppID: q.Get("app_id"), RunID: q.Get("run_id")}
	if e.none() {
		return nil, badRequest("name at least one of user_id, agent_id, app_id, run_id: the facade does not delete a whole project")
	}
	if err := checkEntities(e); err != nil {
		return nil, err
	}
	ns, err := f.namespaceOf(e.AppID)
	if err != nil {
		return nil, err
	}
	a, err := c.loom.Clear(ctx, ns, client.ClearRequest{Agent: e.AgentID, UserID: e.UserID, SessionID: e.RunID})
	if err != nil {
		return nil, err
	}
	return map[string]any{"message": "Memories deleted successfully!",
		"loom": map[string]int{"tombstoned": a.Tombstoned, "skipped_locked": a.SkippedLocked}}, nil
}

// historyEntry is one version as mem0's history answers it.
type historyEntry struct {
	ID         string           `json:"id"`
	MemoryID   string           `json:"memory_id"`
	Input      []map[string]any `json:"input"`
	OldMemory  *string          `json:"old_memory"`
	NewMemory  *string          `json:"new_memory"`
	UserID     *string          `json:"user_id"`
	Event      string           `json:"event"`
	Metadata   map[string]any   `json:"metadata"`
	Categories []string         `json:"categories"`
	CreatedAt  time.Time        `json:"created_at"`
	UpdatedAt  time.Time        `json:"updated_at"`
	Loom       historyLoom      `json:"loom"`
}

type historyLoom struct {
	VersionText string `json:"version_text"`
	Event       string `json:"event"`
	Status      string `json:"status"`
	Actor       string `json:"actor"`
	Redacted    bool   `json:"redacted,omitempty"`
}

// history is memory.history of the key that holds memory id, oldest first: the first
// version is ADD, a tombstone DELETE, every other version UPDATE.
func (f *facade) history(ctx context.Context, c *call) (any, error) {
	id := c.r.PathValue("id")
	m, err := c.loom.GetByID(ctx, id)
	if err != nil {
		return nil, err
	}
	h, err := c.loom.History(ctx, m.Namespace, m.MemoryKey, client.Identity{Agent: m.Agent, UserID: m.UserID, SessionID: m.SessionID})
	if err != nil {
		return nil, err
	}
	out := []historyEntry{}
	var prev *string
	for _, v := range h.Versions {
		if v.MemoryID != id {
			continue
		}
		s := readStored(v.Value)
		text := &s.Memory
		event := "UPDATE"
		switch {
		case prev == nil:
			event = "ADD"
		case v.Tombstone:
			event, text = "DELETE", nil
		}
		if v.Redacted {
			text = nil
		}
		e := historyEntry{ID: fmt.Sprintf("%s-%s", id, v.VersionText), MemoryID: id, Input: []map[string]any{},
			OldMemory: prev, NewMemory: text, UserID: entity(h.UserID), Event: event, Metadata: s.Metadata, Categories: v.Tags,
			CreatedAt: v.UpdatedAt, UpdatedAt: v.UpdatedAt,
			Loom: historyLoom{VersionText: v.VersionText, Event: v.Event, Status: v.Status, Actor: v.Actor, Redacted: v.Redacted}}
		if event == "ADD" && text != nil {
			role := s.Role
			if role == "" {
				role = "user"
			}
			e.Input = append(e.Input, map[string]any{"role": role, "content": *text})
		}
		if e.Metadata == nil {
			e.Metadata = map[string]any{}
		}
		if e.Categories == nil {
			e.Categories = []string{}
		}
		out = append(out, e)
		if text != nil {
			prev = text
		} else {
			prev = new(string)
		}
	}
	return out, nil
}

// batchRequest is the body of PUT and DELETE /v1/batch/.
type batchRequest struct {
	Memories []struct {
		MemoryID string  `json:"memory_id"`
		Text     *string `json:"text"`
	} `json:"memories"`
}

func (c *call) batch(needText bool) (batchRequest, error) {
	var req batchRequest
	if err := c.decode(&req); err != nil {
		return req, err
	}
	if len(req.Memories) == 0 || len(req.Memories) > 1000 {
		return req, badRequest("memories: want 1 to 1000 entries")
	}
	for i, m := range req.Memories {
		if m.MemoryID == "" || (needText && m.Text == nil) {
			return req, badRequest("memories[%d]: want memory_id%s", i, map[bool]string{true: " and text"}[needText])
		}
	}
	return req, nil
}

// batchUpdate updates each memory in turn, as update does. Each is its own commit: an
// error answers at once, the updates before it stay.
func (f *facade) batchUpdate(ctx context.Context, c *call) (any, error) {
	req, err := c.batch(true)
	if err != nil {
		return nil, err
	}
	for i, m := range req.Memories {
		if _, _, err := f.updateText(ctx, c, m.MemoryID, m.Text, nil, client.UpdateRequest{}); err != nil {
			return nil, inMem0Words(err, updateFields(fmt.Sprintf("memories[%d].", i)))
		}
	}
	return map[string]string{"message": fmt.Sprintf("Successfully updated %d memories", len(req.Memories))}, nil
}

// batchDelete deletes each memory in turn, as delete does.
func (f *facade) batchDelete(ctx context.Context, c *call) (any, error) {
	req, err := c.batch(false)
	if err != nil {
		return nil, err
	}
	for _, m := range req.Memories {
		if err := f.deleteID(ctx, c, m.MemoryID); err != nil {
			return nil, err
		}
	}
	return map[string]string{"message": fmt.Sprintf("Successfully deleted %d memories", len(req.Memories))}, nil
}

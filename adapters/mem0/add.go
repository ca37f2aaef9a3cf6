package mem0

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/loomplane/loom/client"
)

// addRequest is the body of POST /v3/memories/add/ as MemoryClient.add sends it.
type addRequest struct {
	Messages json.RawMessage `json:"messages"`
	entities
	Metadata       map[string]any `json:"metadata"`
	Infer          *bool          `json:"infer"`
	Timestamp      json.Number    `json:"timestamp"`
	ExpirationDate string         `json:"expiration_date"`
	addIgnored
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// addResult is one memory an add reports, with mem0's event.
type addResult struct {
	ID     string         `json:"id"`
	Event  string         `json:"event"`
	Memory string         `json:"memory"`
	Data   map[string]any `json:"data"`
	record
}

// The add answer: mem0's envelope (message, status, event_id), done at once since a
// Loom write answers when committed, with the memories in `results`.
type addAnswer struct {
	Message string      `json:"message"`
	Status  string      `json:"status"`
	EventID string      `json:"event_id"`
	Results []addResult `json:"results"`
}

// add, with infer (mem0's default), has Loom's model extract the conversation's facts
// (memory.set_from_messages); without, it stores each message as a memory of its own
// under a fresh key, in one memory.bulk_set: every message is judged against the
// namespace's memories and the others, and all commit together or none.
func (f *facade) add(ctx context.Context, c *call) (any, error) {
	var req addRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	msgs, err := messages(req.Messages)
	if err != nil {
		return nil, err
	}
	if err := checkEntities(req.entities); err != nil {
		return nil, err
	}
	ns, err := f.namespaceOf(req.AppID)
	if err != nil {
		return nil, err
	}
	if infer := req.Infer == nil || *req.Infer; infer && f.Infer == InferRefuse {
		return nil, inferenceUnavailable("this Loom's facade is set to refuse it (LOOM_MEM0_INFER=refuse)")
	} else if infer && f.Infer != InferVerbatim {
		return f.addInferred(ctx, c, ns, req, msgs)
	}
	if err := checkRoles(msgs); err != nil {
		return nil, err
	}
	entry := client.BulkEntry{Identity: req.identity()}
	if req.Timestamp != "" {
		secs, err := strconv.ParseFloat(string(req.Timestamp), 64)
		if err != nil {
			return nil, badRequest("timestamp: want Unix seconds")
		}
		entry.ValidAt = time.Unix(0, int64(secs*1e9)).UTC()
	}
	if req.ExpirationDate != "" {
		t, err := expiration(req.ExpirationDate)
		if err != nil {
			return nil, err
		}
		entry.ValidTo = t
	}
	entries := make([]client.BulkEntry, len(msgs))
	for i, m := range msgs {
		e := entry
		e.Key = "mem0-" + uuid.NewString()
		e.Value = stored{Memory: m.text, Role: m.role, Metadata: req.Metadata}
		entries[i] = e
	}
	a, err := c.loom.BulkSet(ctx, ns, client.BulkSetRequest{Entries: entries})
	if err != nil {
		return nil, inMem0Words(err, addFields(msgs))
	}
	ans, err := f.addAnswer(ctx, c, ns, msgs, a)
	if err != nil {
		return nil, err
	}
	keepTurns(ctx, c, ns, req, msgs, entry.ValidAt, ans)
	return ans, nil
}

// keepTurns keeps the messages of a verbatim add in the conversation's record
// (memory.observe), as an inferred add's memory.set_from_messages keeps its
// transcript, so memory.recall and context.pack find what was said, with its
// neighbours; each result names its message's turn as data.loom_turn_id. It runs after
// the memories' commit, which a failed add leaves with nothing kept to retry over; a
// failure here leaves the memories, each of which holds its message verbatim, and the
// results name no turn.
func keepTurns(ctx context.Context, c *call, ns string, req addRequest, msgs []textMessage, at time.Time, ans *addAnswer) {
	in := client.ObserveRequest{Identity: req.identity()}
	for _, m := range msgs {
		t := client.ObservedTurn{Role: m.role, Content: m.text}
		if !at.IsZero() {
			t.At = &at
		}
		in.Turns = append(in.Turns, t)
	}
	o, err := c.loom.Observe(ctx, ns, in)
	if err != nil || len(o.Turns) != len(msgs) {
		return
	}
	turnOf := map[string]string{}
	for i, m := range msgs {
		turnOf[m.text] = o.Turns[i].TurnID
	}
	for i := range ans.Results {
		r := &ans.Results[i]
		if id, ok := turnOf[r.Memory]; ok && r.Event != "DELETE" {
			r.Data["loom_turn_id"] = id
		}
	}
}

// transcriptRoles are the roles Loom's record of a conversation takes
// (memory.observe, memory.set_from_messages). A verbatim add refuses the others as an
// inferred one does, so the same messages are refused whatever infer says.
var transcriptRoles = map[string]bool{"user": true, "assistant": true, "system": true, "tool": true}

func checkRoles(msgs []textMessage) error {
	for _, m := range msgs {
		if !transcriptRoles[m.role] {
			field := fmt.Sprintf("messages[%d].role", m.index)
			return &httpError{http.StatusUnprocessableEntity, "VALIDATION_FAILED", field + " role must be user, assistant, system or tool", field}
		}
	}
	return nil
}

// textMessage is a message the facade keeps, and its index in the request's list (the
// empty ones are left out), by which a refusal names it.
type textMessage struct {
	role, text string
	index      int
}

func messages(raw json.RawMessage) ([]textMessage, error) {
	var text string
	if json.Unmarshal(raw, &text) == nil && text != "" {
		return []textMessage{{"user", text, 0}}, nil
	}
	var list []message
	if err := json.Unmarshal(raw, &list); err != nil || len(list) == 0 {
		return nil, badRequest("messages: want a non-empty list of {role, content}")
	}
	var out []textMessage
	for i, m := range list {
		var content string
		if err := json.Unmarshal(m.Content, &content); err != nil {
			return nil, badRequest("messages[%d].content: only text is stored (Loom keeps no images)", i)
		}
		if content != "" {
			out = append(out, textMessage{m.Role, content, i})
		}
	}
	if len(out) == 0 {
		return nil, badRequest("messages: every message is empty")
	}
	if len(out) > 1000 {
		return nil, badRequest("messages: at most 1000 per add")
	}
	return out, nil
}

// expiration reads mem0's expiration_date (a date, or an RFC 3339 time): the memory
// is valid until the end of that day.
func expiration(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, badRequest("expiration_date: want a date (2026-12-31) or an RFC 3339 time")
	}
	return d.AddDate(0, 0, 1), nil
}

// addAnswer reports each message: ADD for a memory written, NONE for one a memory
// already held (the id is that memory's: a merge, or a row Loom kept as its duplicate)
// or that was skipped, and DELETE for each memory a refinement retired.
func (f *facade) addAnswer(ctx context.Context, c *call, ns string, msgs []textMessage, a *client.BulkAnswer) (*addAnswer, error) {
	out := addAnswer{Message: "Memories stored", Status: "SUCCEEDED", EventID: uuid.NewString(), Results: []addResult{}}
	byIndex := map[int]addResult{}
	for _, w := range a.Written {
		if w.Verdict == "duplicate" {
			byIndex[w.Index] = f.duplicateResult(ctx, c, w.MemoryID, msgs[w.Index].text)
			continue
		}
		byIndex[w.Index] = f.result(ctx, c, w.MemoryID, "ADD", msgs[w.Index].text, "")
	}
	for _, m := range a.Merged {
		byIndex[m.Index] = f.result(ctx, c, m.MergedInto, "NONE", msgs[m.Index].text, "merge")
	}
	for reason, list := range map[string][]int{"skipped_pinned": a.SkippedPinned, "skipped_locked": a.SkippedLocked,
		"skipped_unchanged": a.SkippedUnchanged, "blacklisted": a.Blacklisted} {
		for _, i := range list {
			r := addResult{Event: "NONE", Memory: msgs[i].text, Data: map[string]any{"memory": msgs[i].text, "loom_reason": reason}}
			r.Loom.Namespace = ns
			byIndex[i] = r
		}
	}
	for i := range msgs {
		if r, ok := byIndex[i]; ok {
			out.Results = append(out.Results, r)
		}
	}
	for _, id := range a.Superseded {
		out.Results = append(out.Results, f.result(ctx, c, id, "DELETE", "", "superseded"))
	}
	return &out, nil
}

// result reads the memory id names (it is committed: a point read sees it at once).
func (f *facade) result(ctx context.Context, c *call, id, event, text, reason string) addResult {
	r := addResult{ID: id, Event: event, Memory: text, Data: map[string]any{"memory": text}}
	if reason != "" {
		r.Data["loom_reason"] = reason
	}
	if m, err := c.loom.GetByID(ctx, id); err == nil {
		r.record = f.record(m)
		if text == "" {
			r.Memory, r.Data["memory"] = r.record.Memory, r.record.Memory
		}
	}
	r.ID = id
	return r
}

// duplicateResult reports a message Loom stored as a duplicate (status duplicate,
// hidden from search) as mem0 reports a fact it already holds: NONE, with the id of
// the memory holding it, and the stored row's id as data.loom_duplicate_id.
func (f *facade) duplicateResult(ctx context.Context, c *call, id, text string) addResult {
	holder := id
	if m, err := c.loom.GetByID(ctx, id); err == nil && m.DuplicateOf != "" {
		holder = m.DuplicateOf
	}
	r := f.result(ctx, c, holder, "NONE", text, "duplicate")
	r.Data["loom_duplicate_id"] = id
	return r
}

func inferenceUnavailable(why string) error {
	return &httpError{status: http.StatusServiceUnavailable, code: "INFERENCE_UNAVAILABLE",
		msg: "infer=true asks for memory extraction by a model, and " + why + ": send infer: false to store each message as written, " +
			"or set LOOM_MEM0_INFER=verbatim on the server to store messages as written whatever infer says"}
}

// addInferred runs memory.set_from_messages over the messages and reports each fact
// mem0's way: ADD for a new memory, UPDATE for a key revised, NONE for a fact a memory
// already held (the id is that memory's), DELETE for a memory retired (forgotten or
// superseded). Facts the pipeline dropped are not reported, as mem0 reports none.
func (f *facade) addInferred(ctx context.Context, c *call, ns string, req addRequest, msgs []textMessage) (any, error) {
	in := client.FromMessagesRequest{Identity: req.identity()}
	for _, m := range msgs {
		in.Messages = append(in.Messages, client.Message{Role: m.role, Content: m.text})
	}
	a, err := c.loom.FromMessages(ctx, ns, in)
	if client.IsCode(err, "LLM_NOT_CONFIGURED") {
		return nil, inferenceUnavailable("this Loom has no model provider (set LOOM_LLM_BASE_URL and LOOM_LLM_MODEL)")
	}
	if err != nil {
		return nil, inMem0Words(err, inferFields(msgs))
	}
	out := addAnswer{Message: "Memories extracted", Status: "SUCCEEDED", EventID: uuid.NewString(), Results: []addResult{}}
	if a.Deferred {
		out.Message, out.Status, out.EventID = "Memories queued for extraction", "PENDING", a.QueueID
		return out, nil
	}
	for _, x := range a.Facts {
		switch {
		case x.Verdict == "dropped" || x.Verdict == "not_written":
		case x.MergedInto != "" || x.DuplicateOf != "":
			out.Results = append(out.Results, f.result(ctx, c, x.MergedInto+x.DuplicateOf, "NONE", x.Value, x.Verdict))
		case x.MemoryID == "":
			r := addResult{Event: "NONE", Memory: x.Value, Data: map[string]any{"memory": x.Value, "loom_reason": x.Verdict}}
			r.Loom.Namespace, r.Loom.Key = ns, x.Key
			out.Results = append(out.Results, r)
		case x.Revised:
			out.Results = append(out.Results, f.result(ctx, c, x.MemoryID, "UPDATE", x.Value, ""))
		default:
			out.Results = append(out.Results, f.result(ctx, c, x.MemoryID, "ADD", x.Value, ""))
		}
	}
	for _, g := range a.Forgotten {
		if g.Retired {
			out.Results = append(out.Results, f.result(ctx, c, g.MemoryID, "DELETE", "", "forgotten"))
		}
	}
	for _, id := range a.Superseded {
		out.Results = append(out.Results, f.result(ctx, c, id, "DELETE", "", "superseded"))
	}
	return out, nil
}

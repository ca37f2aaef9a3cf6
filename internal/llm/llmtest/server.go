// Package llmtest is a scripted OpenAI-compatible API for tests: POST
// /v1/chat/completions (response_format json_schema honoured: a scripted answer is
// checked against the request's schema, and a schema strict mode would refuse is
// refused with OpenAI's 400), POST /v1/embeddings, error statuses with Retry-After,
// slow answers, and a record of every request. Model calls in tests reach this,
// never the network. Only tests import it (a test in this package checks).
package llmtest

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loomplane/loom/internal/llm"
)

// Reply is one scripted answer.
type Reply struct {
	// Content is the answer: JSON-encoded unless it is a string, and checked against
	// the request's schema when it sent one.
	Content any
	// Unchecked sends Content even when it breaks the schema: a malformed answer.
	Unchecked    bool
	Refusal      string
	FinishReason string // "" = "stop"
	// Usage the answer reports; 0 = estimated at four bytes a token.
	PromptTokens, CompletionTokens int64
	Model                          string // "" = the requested model

	// Status, when set, answers this HTTP error with Message instead.
	Status     int
	Message    string
	RetryAfter time.Duration // sent as Retry-After (whole seconds) and Retry-After-Ms
	// Delay holds the answer back, or until the client gives up.
	Delay time.Duration
}

// JSON answers v, encoded, checked against the request's schema.
func JSON(v any) Reply { return Reply{Content: v} }

// Text answers s as it is (checked when the request sent a schema).
func Text(s string) Reply { return Reply{Content: s} }

// Raw answers s as it is, never checked: a malformed structured answer.
func Raw(s string) Reply { return Reply{Content: s, Unchecked: true} }

// Status answers an HTTP error.
func Status(code int, message string) Reply { return Reply{Status: code, Message: message} }

// After holds the reply back for d.
func (r Reply) After(d time.Duration) Reply { r.Delay = d; return r }

// WithRetryAfter sends Retry-After with an error reply.
func (r Reply) WithRetryAfter(d time.Duration) Reply { r.RetryAfter = d; return r }

// WithUsage reports these token counts.
func (r Reply) WithUsage(prompt, completion int64) Reply {
	r.PromptTokens, r.CompletionTokens = prompt, completion
	return r
}

// Message is one message of a chat request.
type Message struct {
	Role, Content string
}

// ChatRequest is a chat completion request as the server read it.
type ChatRequest struct {
	Model               string
	Messages            []Message
	SchemaName          string         // response_format.json_schema.name
	Schema              map[string]any // response_format.json_schema.schema (nil: none)
	Strict              bool
	MaxCompletionTokens int64
	ReasoningEffort     string
	Body                map[string]any // the whole body
}

// Text is every message's content, one per line.
func (r ChatRequest) Text() string {
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	return b.String()
}

// Contains reports whether any message contains s.
func (r ChatRequest) Contains(s string) bool { return strings.Contains(r.Text(), s) }

// EmbedRequest is an embeddings request as the server read it.
type EmbedRequest struct {
	Model      string
	Input      []string
	Dimensions int
	// EncodingFormat is what the request asked for: "base64" is answered as OpenAI
	// does (little-endian float32s), anything else as JSON numbers.
	EncodingFormat string
}

// Recorded is one request the server answered.
type Recorded struct {
	Path   string
	Header http.Header
	Chat   *ChatRequest  // set for chat completions
	Embed  *EmbedRequest // set for embeddings
	Status int           // what the server answered (0 while it holds the answer back)
}

type rule struct {
	match func(ChatRequest) bool
	reply Reply
}

// Server is the scripted API.
type Server struct {
	// URL is the API root, ending in /v1: a provider's LOOM_LLM_BASE_URL.
	URL string

	srv *httptest.Server

	mu         sync.Mutex
	apiKey     string
	rules      []rule
	script     func(ChatRequest) Reply
	embedQueue []Reply
	embedDim   int
	embedWith  func(text string, dim int) []float64
	embedDown  bool // every embeddings request answers 503 until it is back
	requests   []Recorded
	problems   []string
	seq        int
}

// Owner is what New needs of a test (testing.TB), so a benchmark outside one can own a
// server too.
type Owner interface {
	Cleanup(func())
	Errorf(format string, args ...any)
}

// New starts a server; it stops when the test ends, and a script error (an
// unscripted request, content that breaks the request's schema) fails the test.
func New(t Owner) *Server {
	s := &Server{embedDim: 16}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	t.Cleanup(func() {
		s.srv.CloseClientConnections()
		s.srv.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, p := range s.problems {
			t.Errorf("llmtest: %s", p)
		}
	})
	return s
}

// RequireKey answers 401 to a request without "Authorization: Bearer key".
func (s *Server) RequireKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiKey = key
}

// Reply queues answers for the next chat requests, in order.
func (s *Server) Reply(replies ...Reply) { s.ReplyWhen(nil, replies...) }

// ReplyWhen queues answers for the next chat requests match accepts, in order;
// a request takes the first queued answer whose predicate accepts it. The predicate
// runs under the server's lock: it must not call the server.
func (s *Server) ReplyWhen(match func(ChatRequest) bool, replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range replies {
		s.rules = append(s.rules, rule{match: match, reply: r})
	}
}

// Script answers every chat request the queue does not.
func (s *Server) Script(fn func(ChatRequest) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = fn
}

// ReplyEmbeddings queues answers for the next embeddings requests: an error, or a
// delay before the vectors (a Reply without Status answers them).
func (s *Server) ReplyEmbeddings(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embedQueue = append(s.embedQueue, replies...)
}

// EmbedDown takes the embeddings endpoint down (every request answers 503) or brings it
// back: an embedder outage of a length the test decides.
func (s *Server) EmbedDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embedDown = down
}

// EmbedDim sets the dimension of vectors for requests that name none (16).
func (s *Server) EmbedDim(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embedDim = n
}

// EmbedWith scripts the vectors: fn embeds each input (Vector when unset), so a
// test can give the server a score distribution of its own (a semantic model's).
func (s *Server) EmbedWith(fn func(text string, dim int) []float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embedWith = fn
}

// Requests is every request answered so far.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Recorded(nil), s.requests...)
}

// Chats is every chat request answered so far.
func (s *Server) Chats() []ChatRequest {
	var out []ChatRequest
	for _, r := range s.Requests() {
		if r.Chat != nil {
			out = append(out, *r.Chat)
		}
	}
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil && r.Method == http.MethodPost {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "the body is not JSON: "+err.Error(), 0)
		return
	}
	rec := Recorded{Path: r.URL.Path, Header: r.Header.Clone()}
	route := r.Method + " " + r.URL.Path
	switch route {
	case "POST /v1/chat/completions":
		req := readChat(body)
		rec.Chat = &req
	case "POST /v1/embeddings":
		req := readEmbed(body)
		rec.Embed = &req
	}
	// A request is recorded when it arrives, so a test sees an attempt its client
	// has given up on while the answer is still held back.
	s.mu.Lock()
	key := s.apiKey
	at := len(s.requests)
	s.requests = append(s.requests, rec)
	s.mu.Unlock()
	var status int
	switch {
	case rec.Chat == nil && rec.Embed == nil:
		status = writeError(w, http.StatusNotFound, "invalid_request_error", "llmtest: no route "+route, 0)
	case key != "" && r.Header.Get("Authorization") != "Bearer "+key:
		status = writeError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided.", 0)
	case rec.Chat != nil:
		status = s.answerChat(w, r, *rec.Chat)
	default:
		status = s.answerEmbed(w, r, *rec.Embed)
	}
	s.mu.Lock()
	s.requests[at].Status = status
	s.mu.Unlock()
}

func (s *Server) answerChat(w http.ResponseWriter, r *http.Request, req ChatRequest) int {
	if req.Body["stream"] == true {
		s.problem("a chat request asked to stream; llmtest scripts whole answers only")
		return writeError(w, http.StatusBadRequest, "invalid_request_error", "llmtest: streaming is not scripted", 0)
	}
	if req.Schema != nil && req.Strict {
		if err := llm.CheckStrict(req.Schema); err != nil {
			return writeError(w, http.StatusBadRequest, "invalid_request_error",
				fmt.Sprintf("Invalid schema for response_format '%s': %v", req.SchemaName, err), 0)
		}
	}
	reply, ok := s.next(req)
	if !ok {
		s.problem(fmt.Sprintf("unscripted chat request (model %s): %.200q", req.Model, req.Text()))
		return writeError(w, http.StatusInternalServerError, "server_error", "llmtest: no scripted answer", 0)
	}
	if !wait(r, reply.Delay) {
		return 499
	}
	if reply.Status != 0 {
		return writeError(w, reply.Status, errorType(reply.Status), reply.Message, reply.RetryAfter)
	}
	content, err := reply.text()
	if err != nil {
		s.problem(err.Error())
		return writeError(w, http.StatusInternalServerError, "server_error", err.Error(), 0)
	}
	if req.Schema != nil && !reply.Unchecked {
		if err := validate(req.Schema, content); err != nil {
			s.problem(fmt.Sprintf("the scripted answer does not match the request's schema %s: %v", req.SchemaName, err))
			return writeError(w, http.StatusInternalServerError, "server_error", "llmtest: the scripted answer breaks the schema", 0)
		}
	}
	prompt, completion := reply.PromptTokens, reply.CompletionTokens
	if prompt == 0 {
		prompt = tokens(req.Text())
	}
	if completion == 0 {
		completion = tokens(content)
	}
	model := reply.Model
	if model == "" {
		model = req.Model
	}
	finish := reply.FinishReason
	if finish == "" {
		finish = "stop"
	}
	var refusal any
	if reply.Refusal != "" {
		refusal = reply.Refusal
	}
	s.mu.Lock()
	s.seq++
	id := s.seq
	s.mu.Unlock()
	return writeJSON(w, http.StatusOK, map[string]any{
		"id": fmt.Sprintf("chatcmpl-llmtest-%d", id), "object": "chat.completion", "created": time.Now().Unix(), "model": model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "logprobs": nil,
			"message": map[string]any{"role": "assistant", "content": content, "refusal": refusal}}},
		"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
}

// next takes the first queued reply whose predicate accepts req, else the script's.
func (s *Server) next(req ChatRequest) (Reply, bool) {
	s.mu.Lock()
	for i, r := range s.rules {
		if r.match == nil || r.match(req) {
			s.rules = append(s.rules[:i:i], s.rules[i+1:]...)
			s.mu.Unlock()
			return r.reply, true
		}
	}
	script := s.script
	s.mu.Unlock()
	if script != nil {
		return script(req), true
	}
	return Reply{}, false
}

func (s *Server) answerEmbed(w http.ResponseWriter, r *http.Request, req EmbedRequest) int {
	s.mu.Lock()
	var reply Reply
	if s.embedDown {
		reply = Status(http.StatusServiceUnavailable, "the embedder is down")
	} else if len(s.embedQueue) > 0 {
		reply, s.embedQueue = s.embedQueue[0], s.embedQueue[1:]
	}
	dim, embedWith := s.embedDim, s.embedWith
	s.mu.Unlock()
	if embedWith == nil {
		embedWith = Vector
	}
	if !wait(r, reply.Delay) {
		return 499
	}
	if reply.Status != 0 {
		return writeError(w, reply.Status, errorType(reply.Status), reply.Message, reply.RetryAfter)
	}
	if req.Dimensions > 0 {
		dim = req.Dimensions
	}
	data := make([]any, len(req.Input))
	var used int64
	for i, text := range req.Input {
		var vec any = embedWith(text, dim)
		if req.EncodingFormat == "base64" {
			vec = base64Vector(vec.([]float64))
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": vec}
		used += tokens(text)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"object": "list", "model": req.Model, "data": data,
		"usage": map[string]any{"prompt_tokens": used, "total_tokens": used}})
}

// base64Vector is v as OpenAI sends a base64 embedding: its float32s, little-endian.
func base64Vector(v []float64) string {
	raw := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(x)))
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// Vector is the server's embedding of text: words hashed into dim buckets,
// normalised, so texts sharing words are close and equal texts are equal.
func Vector(text string, dim int) []float64 {
	v := make([]float64, dim)
	for _, w := range strings.Fields(strings.ToLower(text)) {
		h := fnv.New32a()
		h.Write([]byte(w))
		v[h.Sum32()%uint32(dim)]++
	}
	var sum float64
	for _, x := range v {
		sum += x * x
	}
	if sum == 0 {
		v[0] = 1
		return v
	}
	for i := range v {
		v[i] /= math.Sqrt(sum)
	}
	return v
}

func (s *Server) problem(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, p)
}

func (r Reply) text() (string, error) {
	if s, ok := r.Content.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(r.Content)
	if err != nil {
		return "", fmt.Errorf("the scripted content does not encode: %w", err)
	}
	return string(b), nil
}

func validate(schema map[string]any, content string) error {
	compiled, err := llm.Compile(schema)
	if err != nil {
		return fmt.Errorf("the request's schema does not compile: %w", err)
	}
	return llm.Validate(compiled, content)
}

// wait holds an answer back for d; false when the client went away first.
func wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func tokens(s string) int64 { return int64(len(s)+3) / 4 }

func errorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func writeError(w http.ResponseWriter, status int, typ, message string, retryAfter time.Duration) int {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
		w.Header().Set("Retry-After-Ms", strconv.FormatInt(retryAfter.Milliseconds(), 10))
	}
	return writeJSON(w, status, map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": nil}})
}

func writeJSON(w http.ResponseWriter, status int, v any) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
	return status
}

func readChat(body map[string]any) ChatRequest {
	req := ChatRequest{Body: body}
	req.Model, _ = body["model"].(string)
	req.ReasoningEffort, _ = body["reasoning_effort"].(string)
	if n, ok := body["max_completion_tokens"].(float64); ok {
		req.MaxCompletionTokens = int64(n)
	}
	msgs, _ := body["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		role, _ := mm["role"].(string)
		req.Messages = append(req.Messages, Message{Role: role, Content: contentText(mm["content"])})
	}
	if rf, ok := body["response_format"].(map[string]any); ok && rf["type"] == "json_schema" {
		js, _ := rf["json_schema"].(map[string]any)
		req.SchemaName, _ = js["name"].(string)
		req.Schema, _ = js["schema"].(map[string]any)
		req.Strict, _ = js["strict"].(bool)
	}
	return req
}

// contentText reads a message's content: a string, or an array of text parts.
func contentText(c any) string {
	switch v := c.(type) {
	case string:
		return v
	case []any:
		var b strings.Builder
		for _, p := range v {
			if pm, ok := p.(map[string]any); ok {
				if t, ok := pm["text"].(string); ok {
					b.WriteString(t)
				}
			}
		}
		return b.String()
	}
	return ""
}

func readEmbed(body map[string]any) EmbedRequest {
	req := EmbedRequest{}
	req.Model, _ = body["model"].(string)
	req.EncodingFormat, _ = body["encoding_format"].(string)
	if n, ok := body["dimensions"].(float64); ok {
		req.Dimensions = int(n)
	}
	switch in := body["input"].(type) {
	case string:
		req.Input = []string{in}
	case []any:
		for _, x := range in {
			s, _ := x.(string)
			req.Input = append(req.Input, s)
		}
	}
	return req
}

package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// JSON-RPC 2.0's codes for a message that is not JSON and one that is not a request.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// rpcRefusal is a message refused before the SDK reads it: answered as a JSON-RPC
// error with a null id, since its id could not be trusted.
type rpcRefusal struct {
	code int
	msg  string
}

func (e *rpcRefusal) Error() string { return e.msg }

// maxExactID bounds a numeric id: the SDK (go-sdk v1.8.0, internal/jsonrpc2.MakeID)
// decodes an id as a float64 and answers it as int64(f), so an id past 2^53 comes back
// another number (99999999999999999999999999 as -9223372036854775808) and 0.5 as 0.
// An id the SDK would not echo exactly is refused rather than answered under another.
// (go-sdk pull request #1253, open, would keep ids exact in the SDK itself.)
const maxExactID = 1 << 53

// integerID is an integer id as the SDK writes it back: no sign on zero, no fraction,
// no exponent, no leading zeros.
var integerID = regexp.MustCompile(`^(0|-?[1-9][0-9]*)$`)

// requestMembers and responseMembers are the members JSON-RPC 2.0 defines; another is
// refused, as the REST API refuses an unknown field.
var (
	requestMembers  = []string{"jsonrpc", "id", "method", "params"}
	responseMembers = []string{"jsonrpc", "id", "result", "error"}
)

// checkFraming holds a streamable HTTP body to what JSON-RPC 2.0 and the REST API
// accept, before the SDK reads it more loosely: exactly one JSON value of valid UTF-8
// (no trailing data, no second value, no NUL), each message an object with
// "jsonrpc": "2.0", only the members JSON-RPC defines, and an id that is a string or
// an integer the SDK echoes exactly.
func checkFraming(body []byte) *rpcRefusal {
	if !utf8.Valid(body) {
		return &rpcRefusal{codeParseError, "Parse error: the body is not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return &rpcRefusal{codeParseError, "Parse error: the body is not JSON: " + err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &rpcRefusal{codeParseError, "Parse error: unexpected data after the JSON-RPC message"}
	}
	if batch, ok := v.([]any); ok {
		if len(batch) == 0 {
			return &rpcRefusal{codeInvalidRequest, "Invalid Request: an empty batch"}
		}
		for i, m := range batch {
			if r := checkMessage(m); r != nil {
				r.msg = fmt.Sprintf("%s (message %d of the batch)", r.msg, i)
				return r
			}
		}
		return nil
	}
	return checkMessage(v)
}

func checkMessage(v any) *rpcRefusal {
	invalid := func(format string, args ...any) *rpcRefusal {
		return &rpcRefusal{codeInvalidRequest, "Invalid Request: " + fmt.Sprintf(format, args...)}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return invalid("a message must be a JSON object")
	}
	if m["jsonrpc"] != "2.0" {
		return invalid(`"jsonrpc" must be "2.0"`)
	}
	members := requestMembers
	if _, isRequest := m["method"]; !isRequest {
		members = responseMembers
	}
	for name := range m {
		if !slices.Contains(members, name) {
			return invalid("unknown member %q: a message has only %v", name, members)
		}
	}
	if method, ok := m["method"]; ok {
		if _, ok := method.(string); !ok {
			return invalid(`"method" must be a string`)
		}
	}
	if params, ok := m["params"]; ok {
		switch params.(type) {
		case map[string]any, []any:
		default:
			return invalid(`"params" must be an object or an array`)
		}
	}
	if id, ok := m["id"]; ok {
		switch id := id.(type) {
		case nil, string:
		case json.Number:
			if !exactID(id.String()) {
				return invalid("the id %s is not an integer between -2^53 and 2^53: this server answers an id exactly as sent, and would not answer this one so; send a string or a smaller integer", id)
			}
		default:
			return invalid(`"id" must be a string or an integer`)
		}
	}
	return nil
}

func exactID(text string) bool {
	if !integerID.MatchString(text) {
		return false
	}
	n, err := strconv.ParseInt(text, 10, 64)
	return err == nil && n >= -maxExactID && n <= maxExactID
}

// writeRefusal answers r as JSON-RPC 2.0 does a message it cannot take: 400, and the
// error object with a null id.
func writeRefusal(w http.ResponseWriter, r *rpcRefusal) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": r.code, "message": r.msg}})
}

// checkedMessages hands the SDK the JSON values read from in, each on a line of its
// own, except those checkFraming refuses: their refusal is written to out, as over
// HTTP, and the session goes on. A stream that stops being JSON cannot be read past,
// so it gets -32700 and ends, as the SDK ended it.
func checkedMessages(in io.ReadCloser, out io.Writer) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		dec := json.NewDecoder(in)
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				if errors.Is(err, io.EOF) {
					pw.Close()
					return
				}
				writeRefusalLine(out, &rpcRefusal{codeParseError, "Parse error: the stream is not JSON: " + err.Error()})
				pw.CloseWithError(err)
				return
			}
			if r := checkFraming(raw); r != nil {
				writeRefusalLine(out, r)
				continue
			}
			if _, err := pw.Write(append(raw, '\n')); err != nil {
				return // the session ended
			}
		}
	}()
	return pipeReader{pr, in}
}

// pipeReader closes the source with the pipe, so the reading goroutine ends.
type pipeReader struct {
	*io.PipeReader
	src io.Closer
}

func (p pipeReader) Close() error {
	p.PipeReader.Close()
	return p.src.Close()
}

// lockedWriter keeps a refusal from interleaving with the SDK's messages: each is one
// Write.
type lockedWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return l.w.Close() }

func writeRefusalLine(w io.Writer, r *rpcRefusal) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": r.code, "message": r.msg}})
	w.Write(append(b, '\n'))
}

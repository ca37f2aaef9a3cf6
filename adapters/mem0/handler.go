// Package mem0 is a mem0-compatible facade over Loom's REST API: the endpoints the
// mem0ai MemoryClient calls (ping, add, search, list, get, update, delete, delete all,
// history, batch update and delete), mapped onto Loom's operations through package
// client, as the caller's token. docs/mem0.md says how each field and event maps.
//
// A mem0 API key is a Loom token: `Authorization: Token <key>` (or Bearer) is sent on as
// Loom's bearer token, so what a key may read and write is exactly what the token may.
package mem0

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/loomplane/loom/client"
	"github.com/loomplane/loom/internal/jsonbody"
	"github.com/loomplane/loom/internal/memrow"
)

// Inference modes (LOOM_MEM0_INFER): what an add with infer=true does.
const (
	InferExtract  = "extract"  // memory.set_from_messages: a model extracts the facts, each judged as any write
	InferRefuse   = "refuse"   // answer 503
	InferVerbatim = "verbatim" // store each message as written, as infer=false does
)

// Options configure the facade.
type Options struct {
	// Loom is the client the facade calls Loom with; each request's calls act as the
	// request's API key (Loom.WithToken), whatever token Loom holds.
	Loom *client.Client
	// Namespace holds the memories of requests that name no app_id.
	Namespace string
	// Infer is InferExtract (the default, ""), InferRefuse or InferVerbatim.
	Infer string
}

type facade struct {
	Options
	namespace string
}

// NewHandler returns the facade. It expects the paths mem0's client sends
// (/v1/ping/, /v3/memories/add/, ...): mount it under a prefix with http.StripPrefix.
func NewHandler(o Options) http.Handler {
	f := &facade{Options: o, namespace: o.Namespace}
	if f.namespace == "" {
		f.namespace = "mem0"
	}
	mux := http.NewServeMux()
	route := func(method, path string, h func(context.Context, *call) (any, error)) {
		for _, p := range []string{path, strings.TrimSuffix(path, "/")} {
			pattern := method + " " + p
			if strings.HasSuffix(p, "/") {
				pattern += "{$}"
			}
			mux.HandleFunc(pattern, f.serve(h))
		}
	}
	route("GET", "/v1/ping/", f.ping)
	route("POST", "/v3/memories/add/", f.add)
	route("POST", "/v3/memories/search/", f.search)
	route("POST", "/v3/memories/", f.list)
	route("GET", "/v1/memories/{id}/", f.get)
	route("PUT", "/v1/memories/{id}/", f.update)
	route("DELETE", "/v1/memories/{id}/", f.delete)
	route("DELETE", "/v1/memories/", f.deleteAll)
	route("GET", "/v1/memories/{id}/history/", f.history)
	route("PUT", "/v1/batch/", f.batchUpdate)
	route("DELETE", "/v1/batch/", f.batchDelete)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "RESOURCE_NOT_FOUND", fmt.Sprintf("%s %s is not an endpoint of Loom's mem0 facade (docs/mem0.md lists them)", r.Method, r.URL.Path))
	})
	return mux
}

// call is one mem0 request: its Loom client and what it sent.
type call struct {
	loom *client.Client
	r    *http.Request
	body []byte
}

// decode reads the JSON body into v as strictly as the REST API reads its own
// (jsonbody.Decode: one JSON object of storable text, nothing after it, no unknown
// or misspelt field), then again keeping numbers as sent; an empty body leaves v as it
// is. A refusal names mem0's field, with the facade's 400.
func (c *call) decode(v any) error {
	if len(bytes.TrimSpace(c.body)) == 0 {
		return nil
	}
	if err := jsonbody.Decode(c.body, reflect.New(reflect.TypeOf(v).Elem()).Interface()); err != nil {
		var r *jsonbody.Refusal
		var fe *memrow.FieldError
		switch {
		case errors.As(err, &r):
			return &httpError{http.StatusBadRequest, memrow.CodeValidationFailed, r.Message, r.Field}
		case errors.As(err, &fe):
			return &httpError{http.StatusBadRequest, fe.Code, fe.Message, fe.Field}
		}
		return badRequest("the body is not the JSON object this endpoint takes: %v", err)
	}
	d := json.NewDecoder(bytes.NewReader(c.body))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return badRequest("the body is not the JSON object this endpoint takes: %v", err)
	}
	return nil
}

// httpError is an answer the facade makes itself (not Loom's); field, when set, is the
// mem0 field it is about.
type httpError struct {
	status           int
	code, msg, field string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, "VALIDATION_FAILED", fmt.Sprintf(format, args...), ""}
}

func (f *facade) serve(h func(context.Context, *call) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := apiKey(r.Header.Get("Authorization"))
		if key == "" {
			writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "missing API key: send Authorization: Token <a Loom token>")
			return
		}
		loom := f.Loom.WithToken(key)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeError(w, http.StatusBadRequest, "VALIDATION_FAILED", "reading the body: "+err.Error())
			return
		}
		out, err := h(r.Context(), &call{loom: loom, r: r, body: body})
		if err != nil {
			writeFailure(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	}
}

// apiKey reads mem0's `Token <key>`, or a bearer token.
func apiKey(h string) string {
	for _, scheme := range []string{"Token ", "Bearer "} {
		if k, ok := strings.CutPrefix(h, scheme); ok {
			return strings.TrimSpace(k)
		}
	}
	return ""
}

// writeFailure answers an error: Loom's own answers (its status and envelope) as they
// came, the facade's with the same envelope.
func writeFailure(w http.ResponseWriter, err error) {
	var he *httpError
	var fe *filterError
	if e, ok := client.AsError(err); ok && e.Code != "" {
		w.Header().Set("Content-Type", "application/json")
		if e.RetryAfter > 0 {
			w.Header().Set("Retry-After", fmt.Sprint(int(e.RetryAfter.Seconds())))
		}
		w.WriteHeader(e.Status)
		w.Write(e.Body)
		return
	}
	switch {
	case errors.As(err, &he):
		writeFieldError(w, he.status, he.code, he.msg, he.field)
	case errors.As(err, &fe):
		writeError(w, http.StatusBadRequest, "VALIDATION_FAILED", fe.msg)
	default:
		writeError(w, http.StatusBadGateway, "UPSTREAM_UNAVAILABLE", "the facade could not reach Loom's API: "+err.Error())
	}
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeFieldError(w, status, code, msg, "")
}

func writeFieldError(w http.ResponseWriter, status int, code, msg, field string) {
	body := map[string]any{"code": code, "message": msg, "retryable": false}
	if field != "" {
		body["field"] = field
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": body})
}

// ping is what MemoryClient calls first: any valid key answers ok.
func (f *facade) ping(ctx context.Context, c *call) (any, error) {
	// The default namespace's policy is any token's read; one that cannot reach it (404)
	// was still authenticated.
	if _, err := c.loom.Namespace(ctx, f.namespace); err != nil && !client.IsCode(err, client.CodeNotFound) {
		return nil, err
	}
	return map[string]any{"status": "ok", "message": "Loom's mem0 facade", "loom": map[string]any{"namespace": f.namespace}}, nil
}

// namespaceOf is the Loom namespace of an app_id: checked here, by mem0's name, since
// Loom would name its own field (and see the client's percent-encoding of a '/').
func (f *facade) namespaceOf(appID string) (string, error) {
	if appID == "" {
		return f.namespace, nil
	}
	if err := memrow.ValidateName("app_id", appID); err != nil {
		return "", entityError(err, appID)
	}
	return appID, nil
}

// checkEntities checks the entity ids a request names, by mem0's names, as Loom checks
// the identity fields they become.
func checkEntities(e entities) error {
	for _, id := range []struct{ field, v string }{{"user_id", e.UserID}, {"agent_id", e.AgentID}, {"run_id", e.RunID}} {
		if id.v == "" {
			continue
		}
		if err := memrow.ValidateIdentity(id.field, id.v); err != nil {
			return entityError(err, id.v)
		}
	}
	return nil
}

func entityError(err error, v string) error {
	var fe *memrow.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	return &httpError{http.StatusBadRequest, "VALIDATION_FAILED", fmt.Sprintf("%s %q %s", fe.Field, v, fe.Message), fe.Field}
}

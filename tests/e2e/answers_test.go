package e2e

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// Answers a client can act on: an unknown method, headers too large, arrays that
// are arrays, and validation that names the field to fix in words, not Go's.
func TestAnswersAClientCanActOn(t *testing.T) {
	base, c, ns := answersEnv(t)

	t.Run("an unknown method is the 405 envelope with Allow", func(t *testing.T) {
		r := c.DoHeaders(t, "BREW", "/v1/namespaces/"+ns+"/memories/k", nil, nil)
		if r.Status != http.StatusMethodNotAllowed || r.ErrorCode() != "METHOD_NOT_ALLOWED" {
			t.Fatalf("BREW: %d %s", r.Status, r.Body)
		}
		req, _ := http.NewRequest("BREW", base+"/v1/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if allow := resp.Header.Get("Allow"); !strings.Contains(allow, "GET") || !strings.Contains(allow, "PUT") {
			t.Fatalf("Allow: %q", allow)
		}
	})

	t.Run("headers too large are 431 HEADERS_TOO_LARGE", func(t *testing.T) {
		// The server answers and closes while the client may still be writing the rest of
		// the 64 KiB; the kernel then resets the connection, which can destroy the answer
		// on its way. A reset is that race, so it is tried again; any answer must be 431.
		var r *testenv.Response
		for attempt := 0; r == nil; attempt++ {
			req, _ := http.NewRequest(http.MethodGet, base+"/v1/namespaces/"+ns+"/memories/k", nil)
			req.Header.Set("Authorization", "Bearer "+c.Token)
			req.Header.Set("X-Padding", strings.Repeat("x", 64<<10))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				if attempt < 10 && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
					continue
				}
				t.Fatalf("64 KiB of headers: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			r = &testenv.Response{Status: resp.StatusCode, Body: body}
		}
		if r.Status != http.StatusRequestHeaderFieldsTooLarge || r.ErrorCode() != "HEADERS_TOO_LARGE" {
			t.Fatalf("64 KiB of headers: %d %s", r.Status, r.Body)
		}
	})

	t.Run("a lower-case bearer scheme is a bearer token", func(t *testing.T) {
		r := c.DoHeaders(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/k", nil, map[string]string{"Authorization": "bearer " + c.Token})
		if r.Status != http.StatusOK {
			t.Fatalf("bearer in lower case: %d %s", r.Status, r.Body)
		}
	})

	t.Run("arrays are [] not null", func(t *testing.T) {
		ready := testenv.NewClient(base, "").Do(t, http.MethodGet, "/v1/health/ready", nil)
		if !strings.Contains(string(ready.Body), `"pending_migrations":[]`) {
			t.Fatalf("ready: %s", ready.Body)
		}
		bulk := c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:bulkSet", []byte(`{"entries": [{"key": "b1", "value": "a bulk fact"}]}`))
		if bulk.Status != http.StatusOK || !strings.Contains(string(bulk.Body), `"superseded":[]`) {
			t.Fatalf("bulk_set: %d %s", bulk.Status, bulk.Body)
		}
		search := c.Do(t, http.MethodPost, "/v1/namespaces/"+testenv.Unique(t, "empty")+"/memories:search", []byte(`{"query": "nothing here"}`))
		if search.Status != http.StatusOK || !strings.Contains(string(search.Body), `"hits":[]`) {
			t.Fatalf("search of an empty namespace: %d %s", search.Status, search.Body)
		}
	})

	t.Run("validation names the field to fix", func(t *testing.T) {
		c.Set(t, ns, "v", "version one")
		search := "/v1/namespaces/" + ns + "/memories:search"
		list := "/v1/namespaces/" + ns + "/memories"
		for _, cs := range []struct {
			name, method, path, body, field, says string
		}{
			{"top_k a huge exponent", http.MethodPost, search, `{"query": "x", "top_k": 1e9}`, "top_k", "top_k must be an integer from 1 to 100"},
			{"top_k a fraction", http.MethodPost, search, `{"query": "x", "top_k": 2.5}`, "top_k", "top_k must be an integer from 1 to 100"},
			{"top_k above the ceiling", http.MethodPost, search, `{"query": "x", "top_k": 1000}`, "top_k", "top_k must be an integer from 1 to 100"},
			{"a search's as_of that is no time", http.MethodPost, search, `{"query": "x", "as_of": "yesterday"}`, "as_of", "as_of must be an RFC 3339 time"},
			{"a redaction's version that is no version", http.MethodPost, "/v1/namespaces/" + ns + "/memories/v:redact", `{"version": "first"}`, "version", "version must be the version"},
			{"list tags_mode", http.MethodGet, list + "?tags_mode=some", "", "tags_mode", "tags_mode must be all or any"},
			{"list include_superseded", http.MethodGet, list + "?include_superseded=maybe", "", "include_superseded", "include_superseded must be true or false"},
			{"list as_of that is no time", http.MethodGet, list + "?as_of=yesterday", "", "as_of", "as_of must be an RFC 3339 time"},
			{"a field name in another case", http.MethodPut, "/v1/namespaces/" + ns + "/memories/k2", `{"Value": "blue"}`, "Value", `did you mean "value"?`},
			{"an unknown field", http.MethodPut, "/v1/namespaces/" + ns + "/memories/k2", `{"value": 1, "valeu": 2}`, "valeu", `unknown field "valeu"`},
			{"a namespace with a Unicode letter", http.MethodPut, "/v1/namespaces/caf%C3%A9/memories/k", `{"value": 1}`, "namespace", "only ASCII letters"},
		} {
			r := c.Do(t, cs.method, cs.path, []byte(cs.body))
			e, _ := r.JSON(t)["error"].(map[string]any)
			msg, _ := e["message"].(string)
			if r.Status != http.StatusUnprocessableEntity || e["field"] != cs.field || !strings.Contains(msg, cs.says) {
				t.Errorf("%s: %d %s, want 422 naming %s: %q", cs.name, r.Status, r.Body, cs.field, cs.says)
			}
			if strings.Contains(msg, "Go struct") || strings.Contains(msg, "2006-01-02") || strings.Contains(msg, "cannot unmarshal") {
				t.Errorf("%s: the message shows Go's parser: %s", cs.name, msg)
			}
		}
		// Nothing was written under the wrong spelling.
		if r := c.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/k2", nil); r.Status != http.StatusNotFound {
			t.Fatalf(`{"Value": ...} wrote: %d %s`, r.Status, r.Body)
		}
	})

	t.Run("the char limit counts a string's characters, not its quotes", func(t *testing.T) {
		lim := c
		limited := testenv.Unique(t, "limit")
		lim.Configure(t, limited, map[string]any{"conflict_policy": "append_only", "types": map[string]any{"fact": map[string]any{"char_limit": 10}}})
		if r := lim.Do(t, http.MethodPut, "/v1/namespaces/"+limited+"/memories/ten", []byte(`{"value": "0123456789"}`)); r.Status != http.StatusOK {
			t.Fatalf("ten characters under a limit of ten: %d %s", r.Status, r.Body)
		}
		if r := lim.Do(t, http.MethodPut, "/v1/namespaces/"+limited+"/memories/eleven", []byte(`{"value": "0123456789a"}`)); r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != "CHAR_LIMIT_EXCEEDED" {
			t.Fatalf("eleven characters under a limit of ten: %d %s", r.Status, r.Body)
		}
	})
}

// answersEnv is a process's URL, an admin client of org acme and a namespace.
func answersEnv(t *testing.T) (base string, c *testenv.Client, ns string) {
	n, base := env.SharedAPI(t)
	c = testenv.NewClient(base, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns = testenv.Unique(t, "answers")
	c.Set(t, ns, "k", "the answer is forty-two")
	return base, c, ns
}

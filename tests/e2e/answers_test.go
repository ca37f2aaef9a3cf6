package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// Answers a client can act on: an unknown method, headers too large, arrays that
// are arrays.
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
		r := c.DoHeaders(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/k", nil, map[string]string{"X-Padding": strings.Repeat("x", 64<<10)})
		if r.Status != http.StatusRequestHeaderFieldsTooLarge || r.ErrorCode() != "HEADERS_TOO_LARGE" {
			t.Fatalf("64 KiB of headers: %d %s", r.Status, r.Body)
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

}

// answersEnv is a process's URL, an admin client of org acme and a namespace.
func answersEnv(t *testing.T) (base string, c *testenv.Client, ns string) {
	n, base := env.API(t, nil)
	c = testenv.NewClient(base, env.Token(t, n, auth.NewToken{Org: "acme"}))
	ns = testenv.Unique(t, "answers")
	c.Set(t, ns, "k", "the answer is forty-two")
	return base, c, ns
}

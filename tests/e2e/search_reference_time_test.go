package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/client"
)

// A search carries the conversation's date: "yesterday" is the day before
// reference_time, not before the server's clock, so the memory dated that day ranks
// first against one dated a month earlier, though both are long past on the server.
func TestSearchReadsYesterdayAgainstTheReferenceTime(t *testing.T) {
	e := newPhaseEnv(t, map[string]any{"conflict_policy": "append_only"})
	session := time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC)
	typedSet(t, e.c, e.ns, "turn.hike", client.SetRequest{Value: "went hiking up the ridge trail with Jonas", ValidAt: session})
	// The other memory is the closer text: it ranks first unless the date lifts the hike.
	typedSet(t, e.c, e.ns, "turn.plan", client.SetRequest{Value: "what I do on weekends: pottery class and a long swim",
		ValidAt: session.AddDate(0, -1, 0)})

	q := "what did I do yesterday?"
	a := e.search(e.c, q, client.SearchRequest{ReferenceTime: session.AddDate(0, 0, 1)})
	if got := answerKeys(a); len(got) == 0 || got[0] != "turn.hike" {
		t.Fatalf("asked the day after the hike: ranked %v, want turn.hike first", got)
	}
	if d := a.Hits[0].Scores.Date; d == nil || *d != 1 {
		t.Errorf("the hike carries no date score: %+v", a.Hits[0].Scores)
	}
	// Asked on the server's clock, yesterday is another day: neither memory is lifted.
	plain := e.search(e.c, q, client.SearchRequest{})
	if got := answerKeys(plain); len(got) == 0 || got[0] != "turn.plan" {
		t.Errorf("on the server's clock: ranked %v, want the closer text first", got)
	}
	for _, h := range plain.Hits {
		if d := h.Scores.Date; d != nil && *d != 0 {
			t.Errorf("without reference_time %s was dated yesterday: %+v", h.MemoryKey, h.Scores)
		}
	}

	r := e.c.Do(t, http.MethodPost, "/v1/namespaces/"+e.ns+"/memories:search", []byte(`{"query": "x", "reference_time": "yesterday"}`))
	body, _ := r.JSON(t)["error"].(map[string]any)
	if msg, _ := body["message"].(string); r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != "VALIDATION_FAILED" ||
		body["field"] != "reference_time" || !strings.Contains(msg, "RFC 3339") {
		t.Fatalf("reference_time that is no time: %d %s", r.Status, r.Body)
	}
}

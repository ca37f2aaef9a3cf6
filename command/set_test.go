package command

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/loomplane/loom/internal/embed"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

func ptr[T any](v T) *T { return &v }

// fieldOf returns the field a 422 names, or "" for any other error.
func fieldOf(err error) string {
	var he *httperr.Error
	if errors.As(err, &he) && he.Status == http.StatusUnprocessableEntity {
		return he.Field
	}
	var fe *memrow.FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}

func TestBuildSetRow(t *testing.T) {
	e := embed.NewHash(8)
	rev := &revision{op: "memory.set", id: memrow.Identity{Org: "o", Namespace: "n", Agent: "-", UserID: "-", SessionID: "-", MemoryKey: "k"},
		actor: "token:t", value: []byte(`"v"`), sha: memrow.ContentSHA256([]byte(`"v"`)), vector: make([]float32, 8)}
	live := &memrow.Row{MemoryID: "id-1", MemoryType: "preference", Tags: []string{"ui"}, Confidence: 0.7,
		ContentSHA256: rev.sha, ReinforcementCount: 2, Status: memrow.StatusActive}

	t.Run("first write takes the defaults", func(t *testing.T) {
		r := buildSetRow(rev, &setRequest{}, nil, e)
		if r.MemoryID != "" || r.MemoryType != "fact" || r.Confidence != 1 || r.ReinforcementCount != 0 || len(r.Tags) != 0 {
			t.Fatalf("first write: %+v", r)
		}
		if r.Actor != "token:t" || r.EmbeddingDim != 8 || r.EmbeddingModel != e.Model() {
			t.Fatalf("provenance or embedding not stamped: %+v", r)
		}
	})
	t.Run("restatement reinforces and keeps the id", func(t *testing.T) {
		r := buildSetRow(rev, &setRequest{}, live, e)
		if r.ReinforcementCount != 3 || r.MemoryID != "id-1" {
			t.Fatalf("restatement: %+v", r)
		}
	})
	t.Run("a new value resets reinforcement, carries the rest forward", func(t *testing.T) {
		changed := *live
		changed.ContentSHA256 = strings.Repeat("0", 64)
		r := buildSetRow(rev, &setRequest{}, &changed, e)
		if r.ReinforcementCount != 0 || r.MemoryType != "preference" || r.Tags[0] != "ui" || r.Confidence != 0.7 {
			t.Fatalf("revision: %+v", r)
		}
	})
	t.Run("the request overrides what it names", func(t *testing.T) {
		r := buildSetRow(rev, &setRequest{MemoryType: "decision", Tags: []string{}, Confidence: ptr(0.2)}, live, e)
		if r.MemoryType != "decision" || len(r.Tags) != 0 || r.Confidence != 0.2 {
			t.Fatalf("override: %+v", r)
		}
	})
	t.Run("a write over a tombstone starts afresh but keeps id and creation", func(t *testing.T) {
		dead := *live
		dead.Tombstone = true
		r := buildSetRow(rev, &setRequest{}, &dead, e)
		if r.ReinforcementCount != 0 || r.MemoryType != "fact" || r.MemoryID != "id-1" {
			t.Fatalf("over a tombstone: %+v", r)
		}
	})
}

func TestDecodeSetRefusesWhatCannotBeStored(t *testing.T) {
	for body, field := range map[string]string{
		``:                                   "body",
		`[1]`:                                "body",
		`{"value": 1} x`:                     "body",
		`{"value": "\u0000"}`:                "body",
		`{"tags": ["a"]}`:                    "value",
		`{"value": 1, "confidence": "high"}`: "confidence",
	} {
		_, err := decodeSet([]byte(body))
		if got := fieldOf(err); got != field {
			t.Fatalf("%q: %v (field %q), want a 422 naming %s", body, err, got, field)
		}
	}
	req, err := decodeSet([]byte(`{"value": {"b": 1, "a": [true, null]}, "agent": "bot", "tags": ["x"]}`))
	if err != nil || string(req.Value) != `{"b": 1, "a": [true, null]}` || req.Agent != "bot" {
		t.Fatalf("valid body: %+v, %v", req, err)
	}
}

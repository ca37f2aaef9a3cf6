package command

import (
	"errors"
	"net/http"
	"testing"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
)

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

func TestDecodeSetRefusesWhatCannotBeStored(t *testing.T) {
	for body, field := range map[string]string{
		``:                                   "body",
		`[1]`:                                "body",
		`{"value": 1} x`:                     "body",
		`{"value": "\u0000"}`:                "body",
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

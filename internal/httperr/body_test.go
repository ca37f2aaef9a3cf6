package httperr

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

type bodyInner struct {
	At *time.Time `json:"at"`
}

type bodyEmbedded struct {
	Agent string `json:"agent"`
}

type bodyShape struct {
	bodyEmbedded
	Value   json.RawMessage      `json:"value"`
	TopK    int                  `json:"top_k"`
	AsOf    *time.Time           `json:"as_of"`
	Inner   bodyInner            `json:"inner"`
	Entries []bodyInner          `json:"entries"`
	Types   map[string]bodyInner `json:"types"`
	Version selfDecoding         `json:"version"`
	Hidden  string               `json:"-"`
}

// selfDecoding refuses everything with its own envelope, as a field type that decodes
// itself does (a redaction's version).
type selfDecoding int

func (*selfDecoding) UnmarshalJSON([]byte) error {
	return Validation("version", "version must be the version of one revision")
}

// DecodeBody refuses what a client can fix, naming the field it must fix: field names
// match exactly (encoding/json alone takes "Value" for "value"), a time must be RFC
// 3339, an integer a whole number; and it says so without Go's parser text.
func TestDecodeBodyNamesTheFieldToFix(t *testing.T) {
	for _, c := range []struct {
		body, field, message string
	}{
		{`{"Value": "blue"}`, "Value", `unknown field "Value": field names are case-sensitive; did you mean "value"?`},
		{`{"AGENT": "a"}`, "AGENT", `did you mean "agent"?`},
		{`{"colour": "blue"}`, "colour", `unknown field "colour"`},
		{`{"Hidden": "x"}`, "Hidden", `unknown field "Hidden"`},
		{`{"inner": {"At": "2026-01-01T00:00:00Z"}}`, "inner.At", `did you mean "at"?`},
		{`{"as_of": "yesterday"}`, "as_of", "as_of must be an RFC 3339 time"},
		{`{"inner": {"at": "2026-13-01"}}`, "inner.at", "inner.at must be an RFC 3339 time"},
		{`{"entries": [{"at": "2026-01-01T00:00:00Z"}, {"at": 5}]}`, "entries[1].at", "entries[1].at must be an RFC 3339 time"},
		{`{"types": {"fact": {"at": "soon"}}}`, "types.fact.at", "RFC 3339"},
		{`{"top_k": 2.5}`, "top_k", "top_k must be a whole number"},
		{`{"top_k": 1e9}`, "top_k", "top_k must be a whole number"},
		{`{"top_k": "3"}`, "top_k", "top_k must be a JSON number"},
		{`{"version": "v1"}`, "version", "version must be the version of one revision"},
		{`[1]`, "body", "the body must be a JSON object"},
		{`{"value": 1} {}`, "body", "unexpected data after the JSON object"},
		{`{"value": `, "body", "malformed JSON"},
	} {
		var v bodyShape
		err := DecodeBody([]byte(c.body), &v)
		var he *Error
		if !errors.As(err, &he) || he.Code != CodeValidationFailed || he.Field != c.field || !strings.Contains(he.Message, c.message) {
			t.Errorf("%s: %v (field %q), want field %q saying %q", c.body, err, fieldOf(he), c.field, c.message)
			continue
		}
		if strings.Contains(he.Message, "Go struct") || strings.Contains(he.Message, "2006-01-02") {
			t.Errorf("%s: the message shows Go's parser: %s", c.body, he.Message)
		}
	}
	var v bodyShape
	body := `{"agent": "a", "value": {"Any": "keys", "inside": [1]}, "top_k": 3, "as_of": "2026-03-14T09:00:00Z",
		"entries": [{"at": "2026-03-14T09:00:00.5+01:00"}], "types": {"Fact": {}}}`
	if err := DecodeBody([]byte(body), &v); err != nil || v.Agent != "a" || v.TopK != 3 || v.AsOf == nil || len(v.Entries) != 1 {
		t.Fatalf("a well-formed body: %v %+v", err, v)
	}
}

func fieldOf(e *Error) string {
	if e == nil {
		return ""
	}
	return e.Field
}

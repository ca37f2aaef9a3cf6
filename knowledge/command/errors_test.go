package command

import (
	"errors"
	"net/http"
	"testing"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/knowledge/parse"
)

func TestParseRefusalsMapToTheirStatus(t *testing.T) {
	for code, status := range map[string]int{
		"UNSUPPORTED_FORMAT": http.StatusUnsupportedMediaType,
		"MALFORMED_DOCUMENT": http.StatusUnprocessableEntity,
		"DOCUMENT_TOO_LARGE": http.StatusRequestEntityTooLarge,
	} {
		var he *httperr.Error
		if err := parseRefusal("documents[1].content", &parse.ParseError{Code: code, Message: "m"}); !errors.As(err, &he) ||
			he.Status != status || he.Code != code || he.Field != "documents[1].content" {
			t.Errorf("%s: %v", code, err)
		}
	}
}

func TestSourceURIsPostgresCannotKeyAreRefused(t *testing.T) {
	for _, uri := range []string{"", "  ", "a\x00b", string([]byte{0xff, 0xfe}), string(make([]byte, MaxSourceURIBytes+1))} {
		if err := checkSourceURI("source_uri", uri); err == nil {
			t.Errorf("%q was taken", uri)
		}
	}
	for _, uri := range []string{"handbook/a.md", "o'brien%_\"; DROP TABLE x;--", "https://example.com/a?b=c#d"} {
		if err := checkSourceURI("source_uri", uri); err != nil {
			t.Errorf("%q: %v", uri, err)
		}
	}
}

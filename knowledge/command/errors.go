package command

import (
	"errors"

	"fmt"
	"net/http"

	"github.com/loomplane/loom/internal/auth"

	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/knowledge/parse"
)

// headMoved is the refusal of a commit one of whose sources' heads is not at the
// version its writer read: nothing of the commit is written.
func headMoved(uri string, read, now int64) *httperr.Error {
	return (&httperr.Error{Status: http.StatusConflict, Code: httperr.CodePreconditionFailed,
		Message: fmt.Sprintf("the head of %q moved: the write read version %d, the head is at %d; read it again and retry", uri, read, now)}).
		With("source_uri", uri).With("head_version", now)
}

// documentErased is the refusal of a commit built from a document version an erasure
// removed (the seed's DocumentErased): nothing of the commit is written.
func documentErased(uri string) *httperr.Error {
	return (&httperr.Error{Status: http.StatusNotFound, Code: httperr.CodeNotFound,
		Message: fmt.Sprintf("the version of %q this write was built from was erased; read the source again", uri)}).
		With("source_uri", uri)
}

// Codes of a document the parser refuses (parse.ParseError's), by the status they
// travel with.
const (
	CodeUnsupportedFormat = "UNSUPPORTED_FORMAT" // 415
	CodeMalformed         = "MALFORMED_DOCUMENT" // 422
	CodeTooLarge          = "DOCUMENT_TOO_LARGE" // 413
)

// parseRefusal maps a parser's refusal to its answer: 415, 422 or 413, naming the
// document (field) it refused.
func parseRefusal(field string, err error) error {
	var pe *parse.ParseError
	if !errors.As(err, &pe) {
		return err
	}
	status := http.StatusUnprocessableEntity
	switch pe.Code {
	case CodeUnsupportedFormat:
		status = http.StatusUnsupportedMediaType
	case CodeTooLarge:
		status = http.StatusRequestEntityTooLarge
	}
	return &httperr.Error{Status: status, Code: pe.Code, Message: pe.Message, Field: field}
}

// mayWrite is 403 for a read-only token, and for a token bound to one session: a
// document has no session. A token bound to a user writes that user's documents
// (user.go).
func mayWrite(p auth.Principal) error {
	if err := p.RequireWrite(); err != nil {
		return err
	}
	if p.ReadSessionID != "" {
		return httperr.New(http.StatusForbidden, httperr.CodePermissionDenied,
			"a knowledge document write: this token acts on one session's memories, and a document has no session")
	}
	return nil
}

// recordTooLarge is the refusal of a document whose change record (its chunks and their
// vectors, sealed) runs past what the topic takes: committed, the relay could never
// publish it and would park it, and the document would never be searched.
// It names the document in source_uri, so an ingest step fails that file alone.
func recordTooLarge(uri string, bytes, chunks, limit int) error {
	e := &httperr.Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Field: "content",
		Message: fmt.Sprintf("%q makes a change record of %d bytes (%d chunks with their vectors), over the topic's limit of %d (LOOM_TOPIC_MAX_RECORD_BYTES); split the document",
			uri, bytes, chunks, limit)}
	return e.With("source_uri", uri)
}

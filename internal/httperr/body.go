package httperr

import (
	"errors"

	"github.com/loomplane/loom/internal/jsonbody"
)

// DecodeBody decodes a JSON object body strictly into v (jsonbody.Decode: storable
// text, field names exactly as documented, nothing after the object, a field of the
// wrong type or a time that is not RFC 3339 named) and answers a refusal as a
// VALIDATION_FAILED *Error, or the error a field's own decoder named.
func DecodeBody(body []byte, v any) error {
	err := jsonbody.Decode(body, v)
	var r *jsonbody.Refusal
	if !errors.As(err, &r) {
		return err
	}
	var he *Error
	if errors.As(r.Cause, &he) { // a field's own decoder named what is wrong
		return he
	}
	return Validation(r.Field, r.Message)
}

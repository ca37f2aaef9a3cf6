package httperr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/loomplane/loom/internal/memrow"
)

// DecodeBody decodes a JSON object body strictly into v: text Postgres cannot store is
// refused before decoding (which would silently turn it into U+FFFD), unknown fields
// and trailing data are refused, and a field of the wrong type is named.
func DecodeBody(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return Validation("body", "the body must be a JSON object")
	}
	if err := memrow.CheckJSONText("body", body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			if typeErr.Field == "" {
				return Validation("body", "the body must be a JSON object")
			}
			return Validation(typeErr.Field, fmt.Sprintf("%s must be a JSON %s", typeErr.Field, jsonKind(typeErr.Type.Kind())))
		}
		return Validation("body", "malformed JSON: "+err.Error())
	}
	if dec.More() {
		return Validation("body", "unexpected data after the JSON object")
	}
	return nil
}

func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.Float32, reflect.Float64, reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Bool:
		return "boolean"
	}
	return "string"
}

// Package jsonbody decodes a request's JSON object body as strictly as the REST API
// reads its own: text Postgres cannot store is refused before decoding (which would
// silently turn it into U+FFFD); a field name must match the one documented exactly
// (encoding/json alone would take "Value" for "value"), so an unknown spelling is
// refused as an unknown field is; trailing data is refused; a field of the wrong type,
// or a time that is not RFC 3339, is named. It is pure code over internal/memrow, so
// the REST handlers (internal/httperr.DecodeBody) and the adapters read bodies alike.
package jsonbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/loomplane/loom/internal/memrow"
)

// Refusal is a body Decode refuses: the field it is about ("body" for the whole) and
// why. Cause is the decoder's error when the refusal comes from decoding, so a caller
// can find an error a field's own decoder returned.
type Refusal struct {
	Field, Message string
	Cause          error
}

func (r *Refusal) Error() string { return r.Field + ": " + r.Message }

func (r *Refusal) Unwrap() error { return r.Cause }

func refuse(field, message string, cause error) *Refusal {
	return &Refusal{Field: field, Message: message, Cause: cause}
}

// Decode decodes a JSON object body strictly into v. It answers a *Refusal, or the
// *memrow.FieldError of text Postgres cannot store.
func Decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return refuse("body", "the body must be a JSON object", nil)
	}
	if err := memrow.CheckJSONText("body", body); err != nil {
		return err
	}
	var tree any
	whole := json.NewDecoder(bytes.NewReader(body))
	if err := whole.Decode(&tree); err != nil {
		return refuse("body", "malformed JSON: "+err.Error(), nil)
	}
	if whole.More() {
		return refuse("body", "unexpected data after the JSON object", nil)
	}
	if _, ok := tree.(map[string]any); !ok {
		return refuse("body", "the body must be a JSON object", nil)
	}
	if err := checkFields(tree, reflect.TypeOf(v), ""); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			if typeErr.Field == "" {
				return refuse("body", "the body must be a JSON object", err)
			}
			return refuse(typeErr.Field, typeMessage(typeErr), err)
		}
		var timeErr *time.ParseError
		if errors.As(err, &timeErr) {
			return refuse("body", "a time is not an RFC 3339 time, such as 2026-03-14T09:00:00Z", err)
		}
		return refuse("body", "malformed JSON: "+err.Error(), err)
	}
	return nil
}

var (
	timeType        = reflect.TypeFor[time.Time]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// checkFields walks a decoded body beside the type it decodes into: every object key
// must name a field exactly, and a time must be RFC 3339. What a type decodes itself
// (a json.Unmarshaler other than time) and what an interface holds are not walked;
// a value of the wrong kind is left for the decoder to name.
func checkFields(val any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType {
		if s, ok := val.(string); val == nil || ok && validTime(s) {
			return nil
		}
		return refuse(path, path+" must be an RFC 3339 time, such as 2026-03-14T09:00:00Z", nil)
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := val.(map[string]any)
		if !ok {
			return nil
		}
		fields := jsonFields(t)
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			ft, ok := fields[key]
			if !ok {
				return unknownField(join(path, key), key, fields)
			}
			if err := checkFields(obj[key], ft, join(path, key)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		items, _ := val.([]any)
		for i, item := range items {
			if err := checkFields(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		obj, _ := val.(map[string]any)
		for key, item := range obj {
			if err := checkFields(item, t.Elem(), join(path, key)); err != nil {
				return err
			}
		}
	}
	return nil
}

func validTime(s string) bool {
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// jsonFields are the JSON names of a struct's fields, the promoted fields of its
// embedded structs included, as encoding/json names them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for n, ft := range jsonFields(et) {
					if _, own := out[n]; !own {
						out[n] = ft
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func unknownField(path, key string, fields map[string]reflect.Type) *Refusal {
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if strings.EqualFold(name, key) {
			return refuse(path, fmt.Sprintf("unknown field %q: field names are case-sensitive; did you mean %q?", key, name), nil)
		}
	}
	return refuse(path, fmt.Sprintf("unknown field %q", key), nil)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// typeMessage says what a field of the wrong type must be: a number that is not a
// whole one, or does not fit, is not an integer.
func typeMessage(e *json.UnmarshalTypeError) string {
	switch e.Type.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if strings.HasPrefix(e.Value, "number") {
			return e.Field + " must be a whole number in range"
		}
	}
	return fmt.Sprintf("%s must be a JSON %s", e.Field, jsonKind(e.Type.Kind()))
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

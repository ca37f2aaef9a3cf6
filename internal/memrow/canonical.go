package memrow

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxDepth matches encoding/json's own nesting limit, so nothing the rest of
// the service could decode is refused here, and a hostile value cannot make
// the recursive parser grow without bound.
const maxDepth = 10000

// object keeps the members of a JSON object; the parser has already refused
// duplicate keys, so a map loses nothing.
type object map[string]any

// Canonical returns the canonical JSON of raw: object keys sorted by their
// UTF-8 bytes, no insignificant whitespace, numbers as their literal text,
// strings escaped minimally (only '"', '\' and control characters) with no
// HTML escaping. Equal values therefore have equal bytes and equal
// ContentSHA256. Malformed JSON, trailing data, duplicate object keys (whose
// meaning differs between readers) and text CheckJSONText refuses are
// FieldErrors naming field.
func Canonical(field string, raw []byte) ([]byte, error) {
	if err := CheckJSONText(field, raw); err != nil {
		return nil, err
	}
	v, err := parse(field, raw)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	encode(&buf, v)
	return buf.Bytes(), nil
}

// parse decodes exactly one JSON value from raw into string, json.Number,
// bool, nil, []any and object.
func parse(field string, raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := parseValue(field, dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalid(field, "is not valid JSON: unexpected data after the value at byte %d", dec.InputOffset())
	}
	return v, nil
}

func parseValue(field string, dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxError(field, err)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	if depth >= maxDepth {
		return nil, invalid(field, "is nested more than %d levels deep", maxDepth)
	}
	switch d {
	case '[':
		arr := []any{}
		for dec.More() {
			v, err := parseValue(field, dec, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		if _, err := dec.Token(); err != nil { // the closing ']'
			return nil, syntaxError(field, err)
		}
		return arr, nil
	case '{':
		obj := object{}
		for dec.More() {
			off := dec.InputOffset()
			kt, err := dec.Token()
			if err != nil {
				return nil, syntaxError(field, err)
			}
			// Token only yields a string in key position; anything else
			// there is already a syntax error.
			key := kt.(string)
			if _, dup := obj[key]; dup {
				return nil, invalid(field, "has duplicate object key %q near byte %d", key, off)
			}
			v, err := parseValue(field, dec, depth+1)
			if err != nil {
				return nil, err
			}
			obj[key] = v
		}
		if _, err := dec.Token(); err != nil { // the closing '}'
			return nil, syntaxError(field, err)
		}
		return obj, nil
	}
	// A stray '}' or ']' is refused by Token itself; this is unreachable.
	return nil, invalid(field, "is not valid JSON: unexpected %q", rune(d))
}

func syntaxError(field string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalid(field, "is not valid JSON: unexpected end of input")
	}
	return invalid(field, "is not valid JSON: %v", err)
}

func encode(buf *bytes.Buffer, v any) {
	switch v := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if v {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case json.Number:
		buf.WriteString(string(v))
	case string:
		encodeString(buf, v)
	case []any:
		buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			encode(buf, e)
		}
		buf.WriteByte(']')
	case object:
		buf.WriteByte('{')
		for i, k := range sortedKeys(v) {
			if i > 0 {
				buf.WriteByte(',')
			}
			encodeString(buf, k)
			buf.WriteByte(':')
			encode(buf, v[k])
		}
		buf.WriteByte('}')
	default:
		panic(fmt.Sprintf("memrow: unexpected JSON value %T", v))
	}
}

// sortedKeys orders keys by their UTF-8 bytes, which is Go's string order.
func sortedKeys(o object) []string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// encodeString writes s as a JSON string escaping only what JSON requires
// ('"', '\' and U+0000..U+001F), the way RFC 8785 does, so any non-ASCII text
// stays readable and the encoding has exactly one form.
func encodeString(buf *bytes.Buffer, s string) {
	const hexDigits = "0123456789abcdef"
	buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf.WriteString(s[start:i])
		switch c {
		case '"', '\\':
			buf.WriteByte('\\')
			buf.WriteByte(c)
		case '\b':
			buf.WriteString(`\b`)
		case '\f':
			buf.WriteString(`\f`)
		case '\n':
			buf.WriteString(`\n`)
		case '\r':
			buf.WriteString(`\r`)
		case '\t':
			buf.WriteString(`\t`)
		default:
			buf.WriteString(`\u00`)
			buf.WriteByte(hexDigits[c>>4])
			buf.WriteByte(hexDigits[c&0xf])
		}
		start = i + 1
	}
	buf.WriteString(s[start:])
	buf.WriteByte('"')
}

// ContentSHA256 is the lowercase hex SHA-256 of a canonical value.
func ContentSHA256(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// CharCount is the number of characters (runes) of a canonical value, the unit the
// char limit is stated in: a string value counts its own characters, not the quotes
// and escapes JSON writes it with; any other value, its canonical JSON.
func CharCount(canonical []byte) int {
	var s string
	if len(canonical) > 0 && canonical[0] == '"' && json.Unmarshal(canonical, &s) == nil {
		return utf8.RuneCountInString(s)
	}
	return utf8.RuneCount(canonical)
}

// CheckCharLimit refuses a canonical value longer than limit characters. A
// limit of zero or less means the namespace set none, so DefaultCharLimit
// applies.
func CheckCharLimit(canonical []byte, limit int) error {
	if limit <= 0 {
		limit = DefaultCharLimit
	}
	if n := CharCount(canonical); n > limit {
		return &FieldError{
			Field:   "value",
			Code:    CodeCharLimitExceeded,
			Message: fmt.Sprintf("is %d characters, over the limit of %d", n, limit),
		}
	}
	return nil
}

// EmbedText is the text a memory is embedded (and lexically indexed) by: the
// words of its value followed by " (#key)", so a search for the key's words
// finds it too.
func EmbedText(key string, canonical []byte) string {
	text := ValueText(canonical)
	if text != "" {
		text += " "
	}
	return text + "(#" + key + ")"
}

// ValueText is the text of a value: a JSON string contributes its text; an object
// or array contributes its object keys and its string, number and bool leaves,
// joined by spaces in canonical order; null contributes nothing.
func ValueText(canonical []byte) string {
	// Most values are a plain string: without escapes, its text is what lies between
	// the quotes (a replay reads this for every revision).
	if n := len(canonical); n >= 2 && canonical[0] == '"' && canonical[n-1] == '"' &&
		bytes.IndexByte(canonical[1:n-1], '\\') < 0 && bytes.IndexByte(canonical[1:n-1], '"') < 0 {
		return string(canonical[1 : n-1])
	}
	return parsedValueText(canonical)
}

// parsedValueText is ValueText for any canonical value.
func parsedValueText(canonical []byte) string {
	var words []string
	v, err := parse("value", canonical)
	if err != nil {
		// Not canonical JSON, which is a caller bug; the raw text is still
		// a better thing to read than nothing.
		words = append(words, string(canonical))
	} else {
		words = appendWords(words, v)
	}
	var b strings.Builder
	for _, w := range words {
		if w == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	return b.String()
}

// ImportKeyPrefix starts every key memory.import names an item by: the prefix and
// ImportKeyHexLen hex digits of the SHA-256 of the item's text.
const (
	ImportKeyPrefix = "import:"
	ImportKeyHexLen = 24
)

// IsImportKey reports whether key has exactly memory.import's shape.
func IsImportKey(key string) bool {
	hex, ok := strings.CutPrefix(key, ImportKeyPrefix)
	if !ok || len(hex) != ImportKeyHexLen {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// KeyWords is the text of a key's words ("user_home-city" → "user home city"), or ""
// when the key carries no letters (an id, a hash) or is an import key, whose digest
// says nothing: such a row is embedded and indexed by its value alone.
func KeyWords(key string) string {
	if IsImportKey(key) {
		return ""
	}
	var words []string
	var cur strings.Builder
	letters := false
	flush := func() {
		if cur.Len() > 0 {
			words = append(words, cur.String())
			cur.Reset()
		}
	}
	for _, r := range key {
		switch {
		case unicode.IsLetter(r):
			letters = true
			cur.WriteRune(r)
		case unicode.IsDigit(r):
			cur.WriteRune(r)
		default:
			flush()
		}
	}
	flush()
	if !letters {
		return ""
	}
	return strings.Join(words, " ")
}

func appendWords(words []string, v any) []string {
	switch v := v.(type) {
	case string:
		words = append(words, v)
	case json.Number:
		words = append(words, string(v))
	case bool:
		if v {
			words = append(words, "true")
		} else {
			words = append(words, "false")
		}
	case []any:
		for _, e := range v {
			words = appendWords(words, e)
		}
	case object:
		for _, k := range sortedKeys(v) {
			words = append(words, k)
			words = appendWords(words, v[k])
		}
	}
	return words
}

// ServedValue is the value a read answers: a stored value's canonical JSON. A value
// read back from jsonb (Postgres opens rows in SQL) has its object keys ordered by
// length first; the API documents canonical JSON, which content_sha256 hashes. A value
// that does not parse (none, a redaction's) is answered as stored.
func ServedValue(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || plainString(raw) {
		return raw
	}
	c, err := Canonical("value", raw)
	if err != nil {
		return raw
	}
	return c
}

// plainString reports whether raw is one JSON string with nothing in it to escape or
// unescape (no quote, backslash or control byte) and valid UTF-8: its canonical JSON is
// itself, and re-encoding it (about 8 µs a search hit) is skipped.
func plainString(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false
	}
	body := raw[1 : len(raw)-1]
	for _, c := range body {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return utf8.Valid(body)
}
